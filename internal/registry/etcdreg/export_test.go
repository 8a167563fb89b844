package etcdreg

// Abandon drops the connection without revoking the lease, as a killed
// process would: the node's keys stay until the lease ends.
func (r *Registry) Abandon() error { return r.cli.Close() }
