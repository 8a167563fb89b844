// Package firetime holds Rota's pure fire-time math: the cron dialect of
// cron_expr (ParseCron, Cron.Next) and the calendar plans of the plan field
// (Plan.Validate, Plan.First, Plan.After). Nothing here performs I/O, starts
// goroutines or reads the clock: every "now" is a parameter, so the engine
// and the HTTP layer can test against fixed instants.
//
// # Why a parser of our own
//
// github.com/robfig/cron/v3 has had no release since 2020 and its issue
// tracker is unattended. It lacks L, W, LW, n#k, nL and a year field, it
// reports errors without saying which field is wrong, and its handling of
// daylight-saving transitions is unspecified (wall times in a spring-forward
// gap are silently dropped or moved). Rota needs exactly one dialect with the
// rules below, tested against a brute-force reference, so this package
// implements it in a few hundred lines of standard-library Go.
//
// # Cron dialect
//
// An expression has 5, 6 or 7 space-separated fields:
//
//	5 fields: minute hour day-of-month month day-of-week          (second = 0)
//	6 fields: second minute hour day-of-month month day-of-week
//	7 fields: second minute hour day-of-month month day-of-week year
//
// Ranges: second and minute 0-59, hour 0-23, day-of-month 1-31, month 1-12 or
// JAN-DEC, day-of-week 0-7 or SUN-SAT (0 and 7 are Sunday), year 1970-2199.
// Names are case-insensitive. Each field is a comma-separated list of items:
// `*`, `v`, `a-b` (a ≤ b), `*/n`, `a-b/n` and `a/n` (from a to the field's
// maximum; Saturday in day-of-week, so `1/2` is MON,WED,FRI), with 1 ≤ n ≤
// the size of the field's range (7 for day-of-week). Special letters (L, W,
// #) are case-insensitive too. `?` means `*` in
// day-of-month and day-of-week. A 5- or 6-field expression whose last field
// looks like a year (a number ≥ 1970 or a range of such) is refused with an
// error that suggests the 7-field form, rather than misread as a weekday.
//
// Special items of day-of-month: `L` (last day of the month), `L-n` (n days
// before the last day, 0 ≤ n ≤ 30; no match in a month shorter than n+1
// days), `nW` (the weekday Monday–Friday nearest to day n without leaving
// the month: a Saturday moves to Friday, or to Monday the 3rd when n is the
// 1st; a Sunday moves to Monday, or to Friday when n is the last day; no
// match in a month without day n) and `LW` (the last weekday of the month).
// Special items of day-of-week: `n#k` (the k-th weekday n of the month,
// 1 ≤ k ≤ 5; no match in a month without a k-th one) and `nL` (the last
// weekday n of the month, e.g. `5L` or `FRIL` is the last Friday). A bare
// `L` in day-of-week is refused as ambiguous. Special items mix freely with
// ordinary ones in a list (`1,15,L`).
//
// Macros: @yearly and @annually (`0 0 0 1 1 *`), @monthly (`0 0 0 1 * *`),
// @weekly (`0 0 0 * * 0`), @daily and @midnight (`0 0 0 * * *`), @hourly
// (`0 0 * * * *`), and `@every <duration>` with a Go duration of at least one
// second and a whole number of seconds (`@every 90s`, `@every 1h30m`).
//
// # Day-of-month and day-of-week
//
// As in Vixie cron: when both fields are restricted — neither is exactly `*`
// or `?` — a day matches when EITHER field matches (`0 0 0 1 * MON` fires on
// the 1st and on every Monday). Otherwise both must match, which simply
// means the restricted one decides. Note that `*/2` counts as restricted.
//
// # @every anchor
//
// `@every d` fires at every instant anchor + k·d for every integer k, that
// is at absolute intervals, unaffected by time zones and daylight saving.
// ParseCron uses the Unix epoch as anchor, so `@every 1h` fires on the hour
// UTC and `@every 90s` is the same grid on every host and after every restart
// without storing any state. ParseCronAnchored takes another anchor (it is
// truncated to a whole second), e.g. the schedule's creation time.
//
// # Impossible expressions
//
// ParseCron refuses an expression that matches no date at all (`0 0 0 30 2
// *`, `0 0 0 31 4 *`, `0 0 0 ? 2 MON#5 2021`). Without a year field it checks
// the 400 years of one full Gregorian cycle, after which weekdays and leap
// years repeat, so the check is exact. An expression whose years are all in
// the past is accepted; Next then reports false.
//
// # Time zones and daylight saving
//
// Fields are matched against the wall clock of the Cron's *time.Location;
// results are instants (returned in UTC). This package embeds the IANA
// database (time/tzdata), so zones resolve on hosts without one.
//
// The rule, stated once for all expressions: an instant fires when its wall
// clock reading matches the expression, with two corrections where the
// location's UTC offset changes by Δ at instant T:
//
//   - Spring forward (Δ > 0; the wall times from T's old reading to its new
//     one do not exist). A matching wall time w in that gap fires once, at
//     T itself, unless the expression also matches w+Δ — the reading, after
//     T, of the instant w would have denoted had the clock not moved —
//     because that later reading fires on its own. So `0 30 2 * * *` fires
//     at 03:00 EDT on the day New York skips 02:00–03:00, `0 0 0 * * *`
//     fires at 01:00 in São Paulo on 2018-11-04, and several gap times
//     (`0 */15 2 * * *`) still fire only once; while `0 30 * * * *` fires at
//     01:30 EST and 03:30 EDT, one hour apart, with nothing extra at 03:00.
//   - Fall back (Δ < 0; the wall times from T's new reading to its old one
//     happen twice). A matching wall time w in that overlap fires at its
//     first occurrence; it fires at its second occurrence only when the
//     expression also matches w+|Δ|, the reading that second instant would
//     have had on the old clock. So `0 30 1 * * *` fires once, at 01:30
//     EDT, while `0 0 * * * *`, `0 */15 * * * *` and `*/5 * * * * *` keep
//     their absolute interval through the repeated hour.
//
// In effect, expressions whose hour field is `*` (and whatever keeps the same
// cadence) fire at absolute intervals through both transitions — no silent
// hour, no double firing — and expressions at fixed hours fire exactly once
// on each matching day. The same rule, written naively second by second, is
// the reference the tests compare Next against.
//
// # Edge cases (tested in dst_edge_test.go)
//
//   - 30-minute shifts (Australia/Lord_Howe) follow the same rule: on the
//     spring-forward day `0 15 2 * * *` fires at 02:30 (the end of the
//     02:00–02:30 gap); on the fall-back day `0 0,30 * * * *` fires at
//     01:30 +11 and again at 01:30 +10:30, keeping its half-hour interval,
//     while `0 45 1 * * *` fires once, at the first 01:45.
//   - `*/2` in the hour field is the list 0,2,…,22 of wall hours, not an
//     interval: across spring forward (New York) it fires 00:00 EST, 03:00
//     EDT (02:00 does not exist), 04:00 EDT; across fall back 00:00 EDT,
//     02:00 EST, 04:00 EST (three hours between the first two).
//   - Adjacent listed hours on a fall-back day: `0 0 1,2 * * *` fires three
//     times, at 01:00 EDT, 01:00 EST and 02:00 EST — twice in the repeated
//     hour, because the second 01:00 reads 02:00 on the old clock, which
//     is listed: the expression keeps its hourly cadence. `0 30 0,1 * * *`
//     fires once in the repeated hour (01:30 EDT): 02:30 is not listed.
//     In short, a listed wall time fires once per day, plus once more in
//     the repeated hour exactly when the next listed time is one shift
//     (Δ) later.
//
// # H and jitter
//
// ExpandH replaces the symbol H (Jenkins' "hash") by values derived from
// the schedule's name, so that many schedules written alike (`H H(0-5) *
// * *`) spread their fires; the expression is stored as written and
// expanded when compiled. Jitter delays each run by a pseudo-random offset
// derived from (schedule id, nominal fire time): the daylight-saving rules
// above give the nominal fire time, and the jitter is added to that
// instant. The recorded fire_time stays nominal.
//
// # Calendar plans
//
// See Plan for the plan types of the plan field and the rules of plan_repet,
// real_repet and no_keep; week and month plans resolve a wall time that falls
// in a gap or an overlap like a fixed-hour cron expression does (the
// transition instant; the first occurrence).
package firetime

import (
	// Embed the IANA time zone database so that LoadLocation works on hosts
	// without /usr/share/zoneinfo (scratch images, Windows).
	_ "time/tzdata"
)
