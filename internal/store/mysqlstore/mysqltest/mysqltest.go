// Package mysqltest gives tests a database of their own on the test MySQL
// or MariaDB server (ROTA_TEST_MYSQL, the local MariaDB by default). A
// missing server fails the test: CI starts one.
package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers the "mysql" driver

	"github.com/rotahq/rota/internal/store/mysqlstore"
)

// DefaultURL is the server of the tests when ROTA_TEST_MYSQL is unset
// (its database is replaced by each test's own).
const DefaultURL = "mysql://root@127.0.0.1:3306/rota_test"

// URL is the server the tests use.
func URL() string {
	if u := os.Getenv("ROTA_TEST_MYSQL"); u != "" {
		return u
	}
	return DefaultURL
}

// server opens the test server without a database.
func server(tb testing.TB) *sql.DB {
	tb.Helper()
	mc, err := mysqlstore.ParseURL(URL())
	if err != nil {
		tb.Fatal(err)
	}
	mc.DBName = ""
	db, err := sql.Open("mysql", mc.FormatDSN())
	if err != nil {
		tb.Fatal(err)
	}
	return db
}

// NewDatabase creates an empty database rota_test_<random> and drops it
// when tb ends; it returns its name.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "rota_test_" + hex.EncodeToString(b[:])
	db := server(tb)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		tb.Fatalf("create database %s on %s (set ROTA_TEST_MYSQL to a reachable MySQL or MariaDB; CI starts one): %v",
			name, mysqlstore.Redact(URL()), err)
	}
	tb.Cleanup(func() {
		db := server(tb)
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})
	return name
}

// Exec runs one statement in database name.
func Exec(tb testing.TB, name, query string, args ...any) {
	tb.Helper()
	db := server(tb)
	defer db.Close()
	if _, err := db.ExecContext(tb.Context(), "USE `"+name+"`"); err != nil {
		tb.Fatal(err)
	}
	conn, err := db.Conn(tb.Context())
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(tb.Context(), "USE `"+name+"`"); err != nil {
		tb.Fatal(err)
	}
	if _, err := conn.ExecContext(tb.Context(), query, args...); err != nil {
		tb.Fatal(err)
	}
}

// URLFor is URL with database name in place of its own.
func URLFor(tb testing.TB, name string) string {
	tb.Helper()
	u, err := url.Parse(URL())
	if err != nil {
		tb.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}
