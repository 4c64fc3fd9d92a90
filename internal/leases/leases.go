// Package leases is the layout of the relays' records in their lease store (an idem store),
// as package relay writes them and the command execstore reads them: a relay registers
// under MemberKey with MemberFingerprint, and holds partition p under PartitionKey with
// Fingerprint; a store that is not partitioned has the one lease named by the lease key.
package leases

import (
	"strconv"
	"strings"
)

// The lease keys of a Relay and of a Sweeper by default (relay.Options.LeaseKey).
const (
	RelayKey   = "execstore/relay/outbox"
	SweeperKey = "execstore/relay/timers"
)

// Fingerprint is the fingerprint every relay claims its partitions' leases with: all claim
// the same keys, so they must agree.
const Fingerprint = "execstore/relay/lease"

const (
	members          = "/members/"
	partitions       = "/partitions/"
	memberPartitions = "/member/partitions="
)

// MembersPrefix is the prefix of the members' keys under leaseKey.
func MembersPrefix(leaseKey string) string { return leaseKey + members }

// MemberKey is the key under which relay member registers itself.
func MemberKey(leaseKey, member string) string { return MembersPrefix(leaseKey) + member }

// PartitionsPrefix is the prefix of the partitions' lease keys under leaseKey.
func PartitionsPrefix(leaseKey string) string { return leaseKey + partitions }

// PartitionKey is the key of partition p's lease.
func PartitionKey(leaseKey string, p int) string { return PartitionsPrefix(leaseKey) + strconv.Itoa(p) }

// PartitionOfKey is the partition whose lease key is key, false when key is not one of
// leaseKey's partitions.
func PartitionOfKey(leaseKey, key string) (int, bool) {
	s, ok := strings.CutPrefix(key, PartitionsPrefix(leaseKey))
	if !ok {
		return 0, false
	}
	p, err := strconv.Atoi(s)
	if err != nil || p < 0 || strconv.Itoa(p) != s {
		return 0, false
	}
	return p, true
}

// ShareRule names the rule by which the live relays of a lease key share its partitions:
// rendezvous hashing with bounded loads (package relay's doc). Relays of one lease key must
// follow one rule; a member fingerprint that names none is of a relay that shares by the
// rule before it, the (p mod n)-th of n.
const ShareRule = "rendezvous"

// memberShare precedes the rule in a member fingerprint.
const memberShare = ";share="

// MemberFingerprint is the fingerprint of a member's lease: it names the number of
// partitions and the ShareRule, so that relays that would share them otherwise see that they
// disagree.
func MemberFingerprint(partitions int) string {
	return PartitioningFingerprint(partitions) + memberShare + ShareRule
}

// PartitioningFingerprint is the fingerprint of the record that fixes the number of
// partitions of a lease key (PartitioningKey): it names the number alone, as relays of
// earlier versions wrote it.
func PartitioningFingerprint(partitions int) string {
	return Fingerprint + memberPartitions + strconv.Itoa(partitions)
}

// PartitionsOfMember is the number of partitions a member or partitioning fingerprint names,
// false for one that names none (a relay of an earlier version).
func PartitionsOfMember(fingerprint string) (int, bool) {
	s, ok := strings.CutPrefix(fingerprint, Fingerprint+memberPartitions)
	if !ok {
		return 0, false
	}
	s, _, _ = strings.Cut(s, memberShare)
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// ShareRuleOfMember is the share rule a member fingerprint names, "" for one that names
// none.
func ShareRuleOfMember(fingerprint string) string {
	_, rule, _ := strings.Cut(fingerprint, memberShare)
	return rule
}
