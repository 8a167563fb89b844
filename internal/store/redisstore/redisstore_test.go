package redisstore_test

import (
	"testing"

	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/redisstore/redistest"
	"github.com/rotahq/rota/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(tb testing.TB) store.Store { return redistest.Open(tb) })
}
