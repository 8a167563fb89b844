// Package rota holds the domain vocabulary of Rota, a durable distributed
// task scheduler: tasks and their runs, statuses, priorities, workers, kinds
// and the error type shared by the server, the HTTP client and the worker SDK.
//
// It depends on the standard library only, so that any program that talks to
// Rota can import it without pulling in a database driver.
package rota
