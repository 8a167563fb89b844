package sqlitestore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: every
// loop started must end at Stop or Close (or when its context ends).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
