package firetime

import (
	"math/bits"
	"time"
)

// This file enumerates the fire times a cron schedule owes between its
// high-water mark and now, cheaply even when that span is a year of
// every-second fires: the latest few are listed, the rest only counted.

// DueTimes returns the latest keep fire times of c in (hw, now], oldest
// first, and how many earlier ones there are in (hw, now].
func DueTimes(c *Cron, hw, now time.Time, keep int) ([]time.Time, int64) {
	if keep < 1 {
		keep = 1
	}
	ring := make([]time.Time, 0, keep)
	push := func(t time.Time) {
		if len(ring) == keep {
			copy(ring, ring[1:])
			ring = ring[:keep-1]
		}
		ring = append(ring, t)
	}
	var n int64
	t := hw
	budget := 4*keep + 64
	for range budget {
		next, ok := c.Next(t)
		if !ok || next.After(now) {
			return ring, n - int64(len(ring))
		}
		push(next)
		n++
		t = next
	}
	// A long gap: find the latest keep fire times in windows that grow
	// backwards from now, and count the rest arithmetically.
	done := t // fire times in (hw, done] are counted in n
	span := done.Sub(hw)
	w := max(time.Duration(float64(span)/float64(n)*float64(keep+1)*2), time.Second)
	for {
		lo := now.Add(-w)
		if !lo.After(done) {
			lo = done
		}
		win := make([]time.Time, 0, keep)
		var m int64
		for x := lo; ; {
			next, ok := c.Next(x)
			if !ok || next.After(now) {
				break
			}
			if len(win) == keep {
				copy(win, win[1:])
				win = win[:keep-1]
			}
			win = append(win, next)
			m++
			x = next
		}
		if m >= int64(keep) || lo.Equal(done) {
			earlier := n + countFires(c, done, lo) + m - int64(len(win))
			return win, earlier
		}
		w *= 4
	}
}

// countFires returns the number of fire instants of c in (a, b].
func countFires(c *Cron, a, b time.Time) int64 {
	if !b.After(a) {
		return 0
	}
	lo, hi := floorUnix(a)+1, floorUnix(b)+1 // whole seconds in [lo, hi)
	if c.every > 0 {
		f := func(x int64) int64 { return floorDiv(x-c.anchor-1, c.every) } // fires ≤ x-1
		return f(hi) - f(lo)
	}
	loc := c.loc
	if loc == nil {
		loc = time.UTC
	}
	var n int64
	var cache monthMaskCache
	for u := lo; u < hi; {
		v := min(u+86400, hi)
		off, stable := steadyOffset(loc, u-6*3600, v)
		if stable {
			n += c.countWall(u+off, v+off, &cache)
		} else {
			// Near a transition the daylight-saving rules decide: ask Next.
			for x := time.Unix(u-1, 0).UTC(); ; {
				next, ok := c.Next(x)
				if !ok || next.Unix() >= v {
					break
				}
				n++
				x = next
			}
		}
		u = v
	}
	return n
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// steadyOffset reports the UTC offset of loc over [from, to) when it does
// not change within it.
func steadyOffset(loc *time.Location, from, to int64) (int64, bool) {
	z := time.Unix(from, 0).In(loc)
	_, off := z.Zone()
	_, end := z.ZoneBounds()
	if !end.IsZero() && end.Unix() < to {
		return 0, false
	}
	return int64(off), true
}

type monthMaskCache struct {
	y, m int
	mask uint32
}

// countWall counts the matching wall readings (naive seconds) in [w0, w1).
func (c *Cron) countWall(w0, w1 int64, cache *monthMaskCache) int64 {
	perDay := int64(bits.OnesCount64(c.hour)) * int64(bits.OnesCount64(c.minute)) * int64(bits.OnesCount64(c.second))
	var n int64
	for w := w0; w < w1; {
		day := floorDiv(w, 86400) * 86400
		end := min(day+86400, w1)
		t := time.Unix(day, 0).UTC()
		y, mo, d := t.Date()
		if c.yearMatches(y) && c.month&(1<<uint(mo)) != 0 {
			if cache.y != y || cache.m != int(mo) {
				cache.y, cache.m, cache.mask = y, int(mo), c.dayMask(y, int(mo))
			}
			if cache.mask&(1<<uint(d)) != 0 {
				if w == day && end == day+86400 {
					n += perDay
				} else {
					n += c.countSeconds(w-day, end-day)
				}
			}
		}
		w = end
	}
	return n
}

// countSeconds counts the matching seconds of a day in [x, y).
func (c *Cron) countSeconds(x, y int64) int64 {
	var n int64
	perHour := int64(bits.OnesCount64(c.minute)) * int64(bits.OnesCount64(c.second))
	perMinute := int64(bits.OnesCount64(c.second))
	for h := x / 3600; h <= (y-1)/3600 && h < 24; h++ {
		if c.hour&(1<<uint(h)) == 0 {
			continue
		}
		hs := h * 3600
		if x <= hs && hs+3600 <= y {
			n += perHour
			continue
		}
		for m := int64(0); m < 60; m++ {
			if c.minute&(1<<uint(m)) == 0 {
				continue
			}
			ms := hs + m*60
			lo, hi := max(x, ms), min(y, ms+60)
			if lo >= hi {
				continue
			}
			if lo == ms && hi == ms+60 {
				n += perMinute
				continue
			}
			mask := c.second >> uint(lo-ms)
			mask &= (uint64(1) << uint(hi-lo)) - 1
			n += int64(bits.OnesCount64(mask))
		}
	}
	return n
}
