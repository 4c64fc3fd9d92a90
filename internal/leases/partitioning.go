package leases

// partitioning is the suffix of the record under a lease key that fixes its number of
// partitions.
const partitioning = "/partitioning"

// PartitioningKey is the key of the record that fixes how many partitions the relays of
// leaseKey share: the first relay to complete it writes its MemberFingerprint there, once,
// and every relay of another number is refused.
func PartitioningKey(leaseKey string) string { return leaseKey + partitioning }
