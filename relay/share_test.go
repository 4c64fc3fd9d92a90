package relay

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomMembers returns n member names as memberName makes them, in name order.
func randomMembers(rng *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("host-%d-%016x", rng.IntN(1<<16), rng.Uint64())
	}
	slices.Sort(out)
	return out
}

// owners returns the member each partition goes to among members.
func owners(members []string, parts int) []string {
	out := make([]string, parts)
	for _, m := range members {
		for p := range shareOf(members, parts, m) {
			out[p] = m
		}
	}
	return out
}

// Every partition goes to exactly one member, and the shares are at most one apart.
func TestShareCoversEveryPartitionOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, parts := range []int{1, 2, 7, 64, 256, 4096} {
		for n := 1; n <= 9; n++ {
			members := randomMembers(rng, n)
			count := map[string]int{}
			seen := make([]int, parts)
			for _, m := range members {
				for p := range shareOf(members, parts, m) {
					require.True(t, p >= 0 && p < parts, "partition %d of %d", p, parts)
					seen[p]++
					count[m]++
				}
			}
			for p, k := range seen {
				require.Equal(t, 1, k, "partition %d of %d among %d members", p, parts, n)
			}
			for _, m := range members {
				assert.True(t, count[m] == parts/n || count[m] == (parts+n-1)/n,
					"%d partitions among %d members: %s has %d", parts, n, m, count[m])
			}
		}
	}
}

// The rule is part of the protocol between relays of every version that names it: the same
// members give the same shares, here and in every build (leases.ShareRule names the rule;
// a change to it is a new rule).
func TestShareIsFixed(t *testing.T) {
	members := []string{"a-1", "b-2", "c-3"}
	assert.Equal(t, []string{"b-2", "c-3", "b-2", "a-1", "a-1", "b-2", "a-1", "a-1", "c-3", "c-3", "b-2", "c-3"}, owners(members, 12))
}

// A relay that joins or leaves moves few partitions besides its own share: over random
// names, 64 partitions and 1 to 8 relays, 1.29 times the partitions of the share it gains or
// loses, where the (p mod n)-th member moved 4.48 times as many.
func TestShareMovesFewPartitions(t *testing.T) {
	const parts = 64
	modulo := func(members []string, parts int) []string {
		out := make([]string, parts)
		for p := range out {
			out[p] = members[p%len(members)]
		}
		return out
	}
	moved := func(a, b []string) int {
		k := 0
		for p := range a {
			if a[p] != b[p] {
				k++
			}
		}
		return k
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var rendezvous, byModulo []float64
	for range 200 {
		names := randomMembers(rng, 9)
		rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		for n := 1; n <= 8; n++ {
			before, after := slices.Sorted(slices.Values(names[:n])), slices.Sorted(slices.Values(names[:n+1]))
			ideal := float64(parts) / float64(n+1) // the joining relay's share
			// A join from before to after, and a leave from after to before, move the same
			// partitions.
			rendezvous = append(rendezvous, float64(moved(owners(before, parts), owners(after, parts)))/ideal)
			byModulo = append(byModulo, float64(moved(modulo(before, parts), modulo(after, parts)))/ideal)
		}
	}
	mean := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	t.Logf("partitions moved by a join or a leave, over the share it gains or loses: %.2f (rendezvous), %.2f (p mod n)",
		mean(rendezvous), mean(byModulo))
	assert.Less(t, mean(rendezvous), 1.35)
	assert.Greater(t, mean(byModulo), 4.0)
	assert.LessOrEqual(t, slices.Max(rendezvous), 2.5, "no join moves much more than its share")
}

// A relay that joins takes its share from every member, and few other partitions change
// hands.
func TestShareJoinTakesFromEveryone(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	members := randomMembers(rng, 4)
	before := owners(members, 64)
	joiner := "host-0-ffffffffffffffff"
	after := owners(slices.Sorted(slices.Values(append(slices.Clone(members), joiner))), 64)
	from := map[string]int{}
	others := 0
	for p := range before {
		switch {
		case after[p] == joiner:
			from[before[p]]++
		case after[p] != before[p]:
			others++
		}
	}
	t.Logf("the joiner took %v; %d others changed hands", from, others)
	assert.Len(t, from, 4, "the joiner's share comes from every member")
	assert.LessOrEqual(t, others, 8)
}
