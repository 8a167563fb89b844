package sqlitestore_test

import (
	"testing"

	"github.com/rotahq/rota/internal/store/storetest"
)

func TestScheduleConformance(t *testing.T) {
	storetest.RunSchedules(t, open)
}
