package pgstore

// CandidatesSQL is the claim's pick, for EXPLAIN in benchmarks. Its
// parameters: kind, now (ms), worker id, max.
var CandidatesSQL = candidatesSQL

// RoundSlots exposes the Go transcription of round_slot to the tests.
func RoundSlots(f, pos, n int) [3][]int64 { return roundSlots(f, pos, n) }
