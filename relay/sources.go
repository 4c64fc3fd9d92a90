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
//
// Apart, read holds the latest version of each source whose items a scan of the hold read,
// complete or not, or that a mark's entries brought: a mark that carries the items of commit v is taken
// only when the source is known(v-1) and nothing read v or later (mayTakeMark), since no
// epoch of the relay's was open when that commit was sent.
type sources struct {
	known  map[string]int64  // source → the version up to which nothing is pending outside the flight
	soiled map[string]uint64 // source → the epoch at which some of its items were left in the store
	marked map[string]int64  // source soiled by marks alone → the latest version they named
	read   map[string]int64  // source → the latest version whose items were read or taken
}

func newSources() sources {
	return sources{known: map[string]int64{}, soiled: map[string]uint64{}, marked: map[string]int64{}, read: map[string]int64{}}
}

// mayTakeMark reports whether the items a mark carries of the commit of src creating version
// may be taken: src is not soiled, is known up to the version before (so every earlier item
// is in flight or no longer pending), and no scan or mark brought that version or a later
// one (so none of its items was handed out already, by a scan whose answer came before the
// mark, acked since, and forgotten; a hand-over of it made the source known up to it). A source's first commit is not taken from a mark: a new
// hold knows nothing, and the scans it sent may have read it.
func (s *sources) mayTakeMark(src string, version int64) bool {
	if _, ok := s.soiled[src]; ok || version < 2 {
		return false
	}
	last, ok := s.known[src]
	return ok && last == version-1 && s.read[src] < version
}

// sawItems records that items of src written up to version were read by a scan, or taken
// from a mark.
func (s *sources) sawItems(src string, version int64) {
	if len(s.read) >= sourcesLimit {
		s.forgetAll()
	}
	s.read[src] = max(s.read[src], version)
}

// forgetAll forgets what is known and read of every source: their next commits are found by
// a scan, and no mark's items are taken until one is known again.
func (s *sources) forgetAll() {
	clear(s.known)
	clear(s.read)
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
		s.forgetAll()
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
