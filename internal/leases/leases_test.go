package leases

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The keys and fingerprints read back what they write, and nothing else.
func TestLayoutRoundTrips(t *testing.T) {
	assert.Equal(t, "k/members/m1", MemberKey("k", "m1"))
	assert.Equal(t, "k/partitions/7", PartitionKey("k", 7))
	p, ok := PartitionOfKey("k", PartitionKey("k", 7))
	assert.True(t, ok)
	assert.Equal(t, 7, p)
	for _, key := range []string{"k/partitions/07", "k/partitions/-1", "k/partitions/x", "k/members/7", "j/partitions/7"} {
		_, ok := PartitionOfKey("k", key)
		assert.False(t, ok, key)
	}
	n, ok := PartitionsOfMember(MemberFingerprint(64))
	assert.True(t, ok)
	assert.Equal(t, 64, n)
	_, ok = PartitionsOfMember(Fingerprint)
	assert.False(t, ok, "a member of an earlier version names none")
	assert.Equal(t, ShareRule, ShareRuleOfMember(MemberFingerprint(64)))

	// The partitioning record names the number alone, as relays of earlier versions wrote
	// it and their members did: those name no share rule.
	assert.Equal(t, "execstore/relay/lease/member/partitions=64", PartitioningFingerprint(64))
	n, ok = PartitionsOfMember(PartitioningFingerprint(64))
	assert.True(t, ok)
	assert.Equal(t, 64, n)
	assert.Empty(t, ShareRuleOfMember(PartitioningFingerprint(64)))
	assert.Equal(t, "execstore/relay/lease/member/partitions=64;share=rendezvous", MemberFingerprint(64))
}
