package etcdreg

import "go.uber.org/zap"

// nopZap silences the etcd client's own logger (it logs retries at warn
// level through zap); the registry reports what matters through slog.
func nopZap() *zap.Logger { return zap.NewNop() }
