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

// NewN returns n ids for objects created at now, as New would return them
// one after the other, at the cost of one allocation for all of them.
func (g *IDGenerator) NewN(now time.Time, n int) []string {
	if n <= 0 {
		return nil
	}
	buf := make([]byte, 32*n)
	ms := uint64(now.UnixMilli())
	g.mu.Lock()
	for i := range n {
		g.next(ms, buf[32*i:])
	}
	g.mu.Unlock()
	all := string(buf)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = all[32*i : 32*i+32]
	}
	return ids
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
