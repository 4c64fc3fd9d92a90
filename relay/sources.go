package relay

// sourcesLimit bounds the sources a hold knows the last commit of. Past it the hold forgets
// them all: their next commits are found by a scan.
const sourcesLimit = 1 << 14

// sources is what a hold knows of each source execution of its partition, to decide
// whether a local commit may be handed over without a scan. A source is
//
//	unknown     nothing is known: only its first commit (version 1) may be handed over.
//	known(v)    no item it wrote up to version v is pending in the store outside the
//	            flight. Its commit v+1 may be handed over, and makes it known(v+1).
//	soiled(n)   some of its items were left in the store at epoch n: released, held back,
//	            or written by a commit not handed over. Nothing of it is handed over.
//	marked(v)   soiled by a mark alone, of a commit that created version v (marked).
//
// A won commit not handed over still records its version. A complete scan begun after n,
// sent and admitted while the hold handed out, that held none of the source's items back,
// clears soiled and makes it known up to the latest commit it read. A complete scan that
// read the source at version v or later clears marked(v), whenever it began: it read what
// commit v left pending. A hold starts knowing none.
type sources struct {
	known  map[string]int64  // source → the version up to which nothing is pending outside the flight
	soiled map[string]uint64 // source → the epoch at which some of its items were left in the store
	marked map[string]int64  // source soiled by marks alone → the latest version they named
}

func newSources() sources {
	return sources{known: map[string]int64{}, soiled: map[string]uint64{}, marked: map[string]int64{}}
}

// mayHandOver reports whether a commit of src creating version may be handed over. When the
// items are not chained (timers), any commit of a source not soiled may be.
func (s *sources) mayHandOver(src string, version int64, chained bool) bool {
	if _, ok := s.soiled[src]; ok {
		return false
	}
	if !chained || version == 1 {
		return true
	}
	last, ok := s.known[src]
	return ok && last == version-1
}

// knows reports whether src is known up to version (positive): every item its commits up to
// version wrote is in flight or no longer pending.
func (s *sources) knows(src string, version int64) bool {
	last, ok := s.known[src]
	return version > 0 && ok && last >= version
}

// committed records a won commit of src creating version, handed over or not.
func (s *sources) committed(src string, version int64) {
	if len(s.known) >= sourcesLimit {
		clear(s.known)
	}
	s.known[src] = max(s.known[src], version)
}

// forget makes src unknown: a commit of it whose outcome is unknown may have written anything.
func (s *sources) forget(src string) { delete(s.known, src) }

// soil records that some of src's items were left in the store at epoch n.
func (s *sources) soil(src string, n uint64) {
	s.soiled[src] = n
	delete(s.marked, src)
}

// mark records, at epoch n, a mark of a commit of src that created version (0: not known).
func (s *sources) mark(src string, n uint64, version int64) {
	_, soiled := s.soiled[src]
	last, marked := s.marked[src]
	if soiled && !marked || version <= 0 {
		s.soil(src, n)
		return
	}
	s.soiled[src] = n
	s.marked[src] = max(last, version)
}

// scanned applies complete scan n: latest is the latest commit it read, per source; partial
// names the sources it held items back of; only, those it read (nil: the partition); except,
// those it left out.
func (s *sources) scanned(n uint64, latest map[string]int64, partial, only, except map[string]bool) {
	for src, at := range s.soiled {
		v, marked := s.marked[src]
		reached := at < n || marked && latest[src] >= v
		if reached && !partial[src] && (only == nil || only[src]) && !except[src] {
			delete(s.soiled, src)
			delete(s.marked, src)
		}
	}
	for src, v := range latest {
		if _, soiled := s.soiled[src]; v > 0 && !soiled && s.known[src] < v {
			s.committed(src, v)
		}
	}
}
