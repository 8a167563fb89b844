package firetime

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
)

// This file spreads fires deterministically: the cron symbol H (as in
// Jenkins) and jitter_seconds. Both hash stable inputs, so every node and
// every restart computes the same instants; nothing here reads the clock.

// MaxJitterSeconds is the largest jitter_seconds.
const MaxJitterSeconds = 86400

// Jitter returns the delay of the fire of schedule id at the nominal fire
// time fire: a pseudo-random offset in [0, jitterSeconds) seconds, in whole
// milliseconds, derived from (id, fire) alone. It is 0 when jitterSeconds
// ≤ 0. The jittered instant is fire + Jitter: an absolute delay, so the
// daylight-saving rules apply to the nominal fire time and the jitter is
// added to the instant they give (a fire at 01:59:50 with 30 s of jitter
// may run at 03:00:10 on a spring-forward day).
func Jitter(id string, fire time.Time, jitterSeconds int) time.Duration {
	if jitterSeconds <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(fire.UnixMilli()))
	h.Write(b[:])
	return time.Duration(h.Sum64()%uint64(jitterSeconds*1000)) * time.Millisecond
}

// hashRanges are the ranges H picks from in each of the 7 fields (second
// … year); day-of-month stops at 28 so that every month has the day.
var hashRanges = [7][2]int{{0, 59}, {0, 59}, {0, 23}, {1, 28}, {1, 12}, {0, 6}, {1970, 2199}}

// ExpandH replaces the symbol H of a cron expression by values derived
// from a hash of name (the schedule's name), as Jenkins does, so that many
// schedules written alike spread their fires: in each field `H` is one
// value of the field's range (day-of-month 1–28), `H(a-b)` one value of
// a–b, `H/n` the step n from an offset below n (`H/15` in minutes is
// m,m+15,… with m < 15) and `H(a-b)/n` the same within a–b. Each field
// takes its own hash, so `H H * * *` picks a minute and an hour
// independently; H is case-sensitive (an upper-case letter). An
// expression without H, or a macro, is returned as is. Errors name the
// field, as ParseCron's do.
func ExpandH(expr, name string) (string, error) {
	if !strings.Contains(expr, "H") || strings.HasPrefix(strings.TrimSpace(expr), "@") {
		return expr, nil
	}
	fields := strings.Fields(expr)
	var index []int // the cron field of each written field
	switch len(fields) {
	case 5:
		index = []int{1, 2, 3, 4, 5}
	case 6:
		index = []int{0, 1, 2, 3, 4, 5}
	case 7:
		index = []int{0, 1, 2, 3, 4, 5, 6}
	default:
		return expr, nil // ParseCron reports the field count
	}
	for i, f := range fields {
		if !strings.Contains(f, "H") {
			continue
		}
		fi := index[i]
		items := strings.Split(f, ",")
		for j, it := range items {
			out, err := expandItem(it, fi, hashOf(name, fi))
			if err != nil {
				return "", &FieldError{Field: FieldCronExpr, Part: fieldNames[fi], Reason: err.Error()}
			}
			items[j] = out
		}
		fields[i] = strings.Join(items, ",")
	}
	return strings.Join(fields, " "), nil
}

var fieldNames = [7]string{"second", "minute", "hour", "day-of-month", "month", "day-of-week", "year"}

func hashOf(name string, field int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{0, byte(field)})
	return h.Sum64()
}

// expandItem expands one list item that contains H.
func expandItem(it string, field int, h uint64) (string, error) {
	if !strings.HasPrefix(it, "H") {
		return "", fmt.Errorf("H must start the item, got %q", it)
	}
	lo, hi := hashRanges[field][0], hashRanges[field][1]
	rest := it[1:]
	if strings.HasPrefix(rest, "(") {
		end := strings.Index(rest, ")")
		if end < 0 {
			return "", fmt.Errorf("unclosed H( in %q", it)
		}
		a, b, ok := strings.Cut(rest[1:end], "-")
		x, err1 := strconv.Atoi(a)
		y, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || x < lo || y > hi || x > y {
			return "", fmt.Errorf("H(a-b) needs %d ≤ a ≤ b ≤ %d, got %q", lo, hi, it)
		}
		lo, hi = x, y
		rest = rest[end+1:]
	}
	switch {
	case rest == "":
		return strconv.Itoa(lo + int(h%uint64(hi-lo+1))), nil
	case strings.HasPrefix(rest, "/"):
		n, err := strconv.Atoi(rest[1:])
		if err != nil || n < 1 || n > hi-lo+1 {
			return "", fmt.Errorf("H/n needs 1 ≤ n ≤ %d, got %q", hi-lo+1, it)
		}
		return fmt.Sprintf("%d-%d/%d", lo+int(h%uint64(n)), hi, n), nil
	}
	return "", fmt.Errorf("invalid H item %q (want H, H(a-b), H/n or H(a-b)/n)", it)
}
