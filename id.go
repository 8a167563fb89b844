package rota

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"
)

// IDGenerator makes 32-character lowercase hex ids that sort by creation
// time: 48 bits of unix milliseconds followed by 80 bits that are random at
// each new millisecond and incremented within one, so ids from one generator
// are strictly increasing. The zero value is ready to use.
type IDGenerator struct {
	mu     sync.Mutex
	lastMS uint64
	hi     uint16 // upper 16 of the 80 trailing bits
	lo     uint64 // lower 64
}

// New returns an id for an object created at now.
func (g *IDGenerator) New(now time.Time) string {
	var out [32]byte
	g.mu.Lock()
	g.next(uint64(now.UnixMilli()), out[:])
	g.mu.Unlock()
	return string(out[:])
}

// NewBlock reserves n (≥ 1) ids for objects created at now without making
// them: the i-th (0 ≤ i < n) is prefix followed by the 16 lowercase hex
// digits of first+i. They sort after every id made before and before every
// id made after, like ids of New; first+i does not wrap, and all n lie on
// one side of 2⁶³ (as int64, first+i neither overflows nor changes sign),
// so that a database can make them from int64(first) with integer
// arithmetic. Reserving costs no encoding: a caller that may use up to n
// ids but often uses none (a claim) pays for the ones it uses only.
func (g *IDGenerator) NewBlock(now time.Time, n int) (prefix string, first uint64) {
	n = max(n, 1)
	var out [32]byte
	g.mu.Lock()
	g.next(uint64(now.UnixMilli()), out[:])
	last := g.lo + uint64(n-1)
	switch {
	case last < g.lo: // wraps: the next ids of the millisecond start over
		g.hi++
		g.lo = 0
	case g.lo < 1<<63 && last >= 1<<63: // crosses 2⁶³: start at it
		g.lo = 1 << 63
	}
	first = g.lo
	g.lo += uint64(n - 1)
	var hi [2]byte
	binary.BigEndian.PutUint16(hi[:], g.hi)
	hex.Encode(out[12:16], hi[:]) // g.hi may have moved on
	g.mu.Unlock()
	return string(out[:16]), first
}

// next writes the next id at ms into out[:32]; g.mu is held.
func (g *IDGenerator) next(ms uint64, out []byte) {
	if ms <= g.lastMS {
		ms = g.lastMS
		g.lo++
		if g.lo == 0 {
			g.hi++
		}
	} else {
		var b [10]byte
		_, _ = rand.Read(b[:])
		g.hi = binary.BigEndian.Uint16(b[:2]) &^ 0x8000 // room to increment
		g.lo = binary.BigEndian.Uint64(b[2:])
		g.lastMS = ms
	}
	var raw [16]byte
	raw[0], raw[1], raw[2], raw[3], raw[4], raw[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	binary.BigEndian.PutUint16(raw[6:8], g.hi)
	binary.BigEndian.PutUint64(raw[8:], g.lo)
	hex.Encode(out[:32], raw[:])
}

// IDPattern is the form of a Rota id.
const IDPattern = `^[0-9a-f]{32}$`

// ValidID reports whether s has the form of a Rota id (IDPattern).
func ValidID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// KindPattern is the pattern a kind name must match.
const KindPattern = `^[A-Za-z0-9_.:-]{1,128}$`

// ValidKind reports whether s is an acceptable kind name (KindPattern).
// It and ValidID are loops rather than regular expressions: every submit,
// claim and report checks them, and the regexp's match was ~3% of the
// server's CPU at 500 tasks/s (TestValidMatchesPattern checks them against
// the patterns).
func ValidKind(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}
