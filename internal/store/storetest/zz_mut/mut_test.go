package zzmut

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/internal/store/storetest"
)

type fix struct{ store.Store }

func (s fix) TaskGet(ctx context.Context, id string) (*rota.Task, error) {
	t, err := s.Store.TaskGet(ctx, id)
	if t != nil {
		for i := range t.Runs {
			if t.Runs[i].Status != rota.StatusRunning {
				t.Runs[i].LeaseExpiresAt = time.Time{}
			}
		}
	}
	return t, err
}

func open(tb testing.TB) store.Store {
	st, err := sqlitestore.New(context.Background(), sqlitestore.Config{Path: filepath.Join(tb.TempDir(), "rota.db")})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return fix{st}
}

func TestMut(t *testing.T) { storetest.Run(t, open) }
