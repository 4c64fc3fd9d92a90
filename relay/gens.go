package relay

import "time"

// gens are the generations a session publishes (wake.Holding's Gen), under its lock: cur is
// the latest drawn, a new one at least one more and at least the Unix time in nanoseconds,
// so that the generations of a holder grow across its runs too.
type gens struct{ cur int64 }

// next draws a generation, later than any drawn before.
func (g *gens) next() int64 {
	g.cur = max(g.cur+1, time.Now().UnixNano())
	return g.cur
}
