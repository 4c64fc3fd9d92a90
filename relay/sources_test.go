package relay

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// What a hold knows of its sources, step by step: which commits may be handed over without a
// scan (see sources).
func TestSources(t *testing.T) {
	type step struct {
		// "commit" (src, v: a won commit), "soil" (src at n), "forget" (src), "scan" (n:
		// complete; latest src→v; partial, only and except as named), "may?" (src, v:
		// chained; want), "knows?" (src, v; want), "mark" (src at n, v)
		// "any?" (src, v: not chained; want), "saw" (src, v: read or handed over),
		// "forgetAll", "take?" (src, v, of the generation the hold began with plus gen; want),
		// "take-now?" (src, v, of the latest generation drawn; want)
		op      string
		gen     int64
		src     string
		v       int64
		n       uint64
		partial []string
		only    []string
		except  []string
		want    bool
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"unknown: only the first commit", []step{
			{op: "may?", src: "a", v: 1, want: true}, {op: "may?", src: "a", v: 2, want: false},
		}},
		{"known: the next commit, and no other", []step{
			{op: "commit", src: "a", v: 1}, {op: "may?", src: "a", v: 2, want: true},
			{op: "may?", src: "a", v: 3, want: false}, {op: "commit", src: "a", v: 2}, {op: "may?", src: "a", v: 3, want: true},
		}},
		{"soiled: nothing, until a complete scan begun after", []step{
			{op: "commit", src: "a", v: 1}, {op: "soil", src: "a", n: 5},
			{op: "may?", src: "a", v: 2, want: false}, {op: "any?", src: "a", v: 2, want: false},
			{op: "scan", n: 5}, {op: "may?", src: "a", v: 2, want: false}, // begun before the soil: not enough
			{op: "scan", n: 6}, {op: "may?", src: "a", v: 2, want: true},
		}},
		{"a scan that held the source back clears nothing", []step{
			{op: "soil", src: "a", n: 1}, {op: "scan", n: 2, partial: []string{"a"}}, {op: "may?", src: "a", v: 1, want: false},
		}},
		{"a targeted read clears the sources it read alone", []step{
			{op: "soil", src: "a", n: 1}, {op: "soil", src: "b", n: 1},
			{op: "scan", n: 2, only: []string{"a"}},
			{op: "may?", src: "a", v: 1, want: true}, {op: "may?", src: "b", v: 1, want: false},
		}},
		{"a mark's version is known once a commit or a scan reached it", []step{
			{op: "knows?", src: "a", v: 1, want: false}, {op: "commit", src: "a", v: 2},
			{op: "knows?", src: "a", v: 2, want: true}, {op: "knows?", src: "a", v: 3, want: false},
			{op: "knows?", src: "a", v: 0, want: false}, // a mark that names no version
			{op: "scan", n: 1, src: "b", v: 4}, {op: "knows?", src: "b", v: 3, want: true},
			{op: "forget", src: "a"}, {op: "knows?", src: "a", v: 1, want: false},
		}},
		{"a mark is paid by a complete scan that read its version, whenever it began", []step{
			{op: "commit", src: "a", v: 1}, {op: "mark", src: "a", n: 5, v: 3},
			{op: "may?", src: "a", v: 4, want: false},
			{op: "scan", n: 4, src: "a", v: 2}, {op: "may?", src: "a", v: 3, want: false}, // an older version
			{op: "scan", n: 4, src: "a", v: 3}, {op: "may?", src: "a", v: 4, want: true},
		}},
		{"a mark adds nothing to another soil, which the epoch clears alone", []step{
			{op: "soil", src: "a", n: 5}, {op: "mark", src: "a", n: 6, v: 3},
			{op: "scan", n: 5, src: "a", v: 3}, {op: "may?", src: "a", v: 4, want: false},
			{op: "scan", n: 7, src: "a", v: 3}, {op: "may?", src: "a", v: 4, want: true},
		}},
		{"a soil after a mark needs the epoch", []step{
			{op: "mark", src: "a", n: 5, v: 3}, {op: "soil", src: "a", n: 6},
			{op: "scan", n: 6, src: "a", v: 3}, {op: "may?", src: "a", v: 4, want: false},
		}},
		{"a mark naming no version needs the epoch", []step{
			{op: "mark", src: "a", n: 5}, {op: "scan", n: 5, src: "a", v: 9}, {op: "may?", src: "a", v: 10, want: false},
			{op: "scan", n: 6, src: "a", v: 9}, {op: "may?", src: "a", v: 10, want: true},
		}},
		{"a scan clears nothing of the sources it left out", []step{
			{op: "soil", src: "a", n: 1}, {op: "soil", src: "b", n: 1},
			{op: "scan", n: 2, except: []string{"a"}},
			{op: "may?", src: "a", v: 1, want: false}, {op: "may?", src: "b", v: 1, want: true},
		}},
		{"a won commit not handed over still counts once the soil is cleared", []step{
			{op: "commit", src: "a", v: 1}, {op: "soil", src: "a", n: 1}, {op: "commit", src: "a", v: 2},
			{op: "scan", n: 2}, {op: "may?", src: "a", v: 3, want: true},
		}},
		{"a scan teaches the latest commit it read", []step{
			{op: "scan", n: 1, src: "a", v: 4}, {op: "may?", src: "a", v: 5, want: true},
		}},
		{"an unknown outcome forgets", []step{
			{op: "commit", src: "a", v: 3}, {op: "forget", src: "a"}, {op: "may?", src: "a", v: 4, want: false},
		}},
		{"a mark is taken when the source is known up to the version before", []step{
			{op: "commit", src: "a", v: 3}, {op: "take?", src: "a", v: 4, want: true}, {op: "take?", src: "a", v: 5, want: false},
			{op: "take?", src: "b", v: 1, want: false},
		}},
		{"a mark of a commit sent before the hold began is not taken", []step{
			{op: "commit", src: "a", v: 3}, {op: "take?", src: "a", v: 4, gen: -1, want: false}, {op: "take?", src: "a", v: 4, gen: 1, want: true},
		}},
		{"a mark of a version read or handed over is not taken, whatever the hold knows since", []step{
			{op: "commit", src: "a", v: 4}, {op: "saw", src: "a", v: 4}, {op: "forget", src: "a"},
			{op: "scan", n: 1, src: "a", v: 3}, {op: "knows?", src: "a", v: 3, want: true}, {op: "take?", src: "a", v: 4, want: false},
		}},
		{"forgetting all refuses the marks of commits sent before", []step{
			{op: "commit", src: "a", v: 3}, {op: "forgetAll"},
			{op: "scan", n: 1, src: "a", v: 3}, {op: "take?", src: "a", v: 4, want: false}, {op: "take-now?", src: "a", v: 4, want: true},
		}},
		{"timers: any commit of a clean source", []step{
			{op: "any?", src: "a", v: 7, want: true}, {op: "soil", src: "a", n: 1}, {op: "any?", src: "a", v: 7, want: false},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSources(&gens{})
			first := s.since
			set := func(names []string) map[string]bool {
				if names == nil {
					return nil
				}
				m := map[string]bool{}
				for _, n := range names {
					m[n] = true
				}
				return m
			}
			for i, st := range c.steps {
				switch st.op {
				case "commit":
					s.committed(st.src, st.v)
				case "soil":
					s.soil(st.src, st.n)
				case "mark":
					s.mark(st.src, st.n, st.v)
				case "forget":
					s.forget(st.src)
				case "scan":
					latest := map[string]int64{}
					if st.src != "" {
						latest[st.src] = st.v
					}
					partial := set(st.partial)
					if partial == nil {
						partial = map[string]bool{}
					}
					s.scanned(st.n, latest, partial, set(st.only), set(st.except))
				case "may?":
					assert.Equal(t, st.want, s.mayHandOver(st.src, st.v, true), "step %d", i)
				case "knows?":
					assert.Equal(t, st.want, s.knows(st.src, st.v), "step %d", i)
				case "saw":
					s.sawItems(st.src, st.v)
				case "forgetAll":
					s.forgetAll()
				case "take?":
					assert.Equal(t, st.want, s.mayTakeMark(st.src, st.v, first+st.gen), "step %d", i)
				case "take-now?":
					assert.Equal(t, st.want, s.mayTakeMark(st.src, st.v, s.since), "step %d", i)
				case "any?":
					assert.Equal(t, st.want, s.mayHandOver(st.src, st.v, false), "step %d", i)
				}
			}
		})
	}
}
