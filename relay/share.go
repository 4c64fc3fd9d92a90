package relay

import "hash/fnv"

// shareOf returns the partitions of parts that member wants among members, the live relays
// of its lease key in the order of their names, member among them. It is the share rule
// every relay of a lease key follows, leases.ShareRule in their member fingerprints: a
// relay of another rule is left out of the share (members).
//
// Rendezvous hashing with bounded loads. Each member has a score for each partition,
// shareScore(member, p). The members in name order have capacities parts/n, the first
// parts%n of them one more. Partition after partition, from 0, each goes to the member of
// the highest score that has capacity left (of equal scores, the first in name order). So
// every relay that lists the same members computes the same shares, the shares are at most
// one apart, and a relay that joins or leaves moves few partitions besides its own: over
// random names, 64 partitions and 1 to 8 relays, a join or a leave moves 1.29 times the
// partitions the share gained or lost holds (TestShareMovesFewPartitions), where the rule
// before it, the (p mod n)-th member, moved 4.48 times as many.
func shareOf(members []string, parts int, member string) map[int]bool {
	n := len(members)
	capacity := make([]int, n)
	seeds := make([]uint64, n)
	for i, m := range members {
		capacity[i] = parts / n
		if i < parts%n {
			capacity[i]++
		}
		seeds[i] = memberSeed(m)
	}
	wanted := map[int]bool{}
	for p := range parts {
		best, bestScore := -1, uint64(0)
		for i := range members {
			if capacity[i] == 0 {
				continue
			}
			if s := shareScore(seeds[i], p); best < 0 || s > bestScore {
				best, bestScore = i, s
			}
		}
		capacity[best]--
		if members[best] == member {
			wanted[p] = true
		}
	}
	return wanted
}

// memberSeed is a member's name hashed (FNV-1a, 64 bits): the seed of its scores.
func memberSeed(member string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	return h.Sum64()
}

// shareScore is the score of the member of seed for partition p: the two mixed by
// splitmix64's finalizer, so that every bit of each moves every bit of the score.
func shareScore(seed uint64, p int) uint64 {
	return mix64(seed ^ mix64(uint64(p)+0x9e3779b97f4a7c15))
}

// mix64 is splitmix64's finalizer.
func mix64(x uint64) uint64 {
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
