package mongostore

import (
	"context"
	"errors"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// errTODO is the answer of the schedule methods, which this backend does
// not implement yet (the schedule areas of the conformance suite fail).
var errTODO = errors.New("mongostore: schedules are not implemented yet on MongoDB")

func (s *Store) ScheduleInsert(ctx context.Context, p store.ScheduleInsertParams) (*rota.Schedule, error) {
	return nil, errTODO
}
func (s *Store) ScheduleGet(ctx context.Context, id string) (*rota.Schedule, error) {
	return nil, errTODO
}
func (s *Store) ScheduleGetByName(ctx context.Context, name string) (*rota.Schedule, error) {
	return nil, errTODO
}
func (s *Store) ScheduleList(ctx context.Context, p store.ScheduleListParams) (store.ScheduleListResult, error) {
	return store.ScheduleListResult{}, errTODO
}
func (s *Store) ScheduleUpdate(ctx context.Context, p store.ScheduleUpdateParams) (*rota.Schedule, error) {
	return nil, errTODO
}
func (s *Store) ScheduleDelete(ctx context.Context, p store.ScheduleDeleteParams) error {
	return errTODO
}
func (s *Store) ScheduleLoad(ctx context.Context, sinceRev int64) (store.ScheduleLoadResult, error) {
	return store.ScheduleLoadResult{}, errTODO
}
func (s *Store) ScheduleFire(ctx context.Context, ps []store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	return nil, errTODO
}
func (s *Store) ScheduleTrigger(ctx context.Context, p store.ScheduleTriggerParams) (*rota.ScheduleRun, error) {
	return nil, errTODO
}
func (s *Store) ScheduleRuns(ctx context.Context, p store.ScheduleRunsParams) (store.ScheduleRunsResult, error) {
	return store.ScheduleRunsResult{}, errTODO
}
func (s *Store) ScheduleOpenRuns(ctx context.Context, ids []string) (map[string][]rota.ScheduleRun, error) {
	return nil, errTODO
}
func (s *Store) ScheduleTargetKinds(ctx context.Context) ([]string, error) { return nil, errTODO }
