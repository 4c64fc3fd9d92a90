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
// complete or not, a hand-over brought, or a mark's entries brought: a mark that carries the
// items of commit v is taken only when the source is known(v-1), nothing read v or later,
// and the commit was sent after the hold began (mayTakeMark). A hold's record of what it
// read, or the version it knows, cannot say whether an earlier hold of the relay handed
// those items out, nor whether its own did before it forgot all (forgetAll): since names
// the least generation (wake.Holding's Gen, gens) of the marks it takes, one drawn when the
// hold began and drawn again when it forgets all.
type sources struct {
	known  map[string]int64  // source → the version up to which nothing is pending outside the flight
	soiled map[string]uint64 // source → the epoch at which some of its items were left in the store
	marked map[string]int64  // source soiled by marks alone → the latest version they named
	read   map[string]int64  // source → the latest version whose items were read or taken
	gens   *gens             // the relay's generations
	since  int64             // the least generation of a mark whose items are taken
}

// newSources returns what a hold begun now knows: nothing, and marks of commits sent after
// the next generation of g.
func newSources(g *gens) sources {
	return sources{known: map[string]int64{}, soiled: map[string]uint64{}, marked: map[string]int64{}, read: map[string]int64{},
		gens: g, since: g.next()}
}

// mayTakeMark reports whether the items a mark of generation gen carries of the commit of
// src creating version may be taken: the commit was sent while the hold held (gen is since or
// later), src is not soiled, is known up to the version before (so every earlier item is in
// flight or no longer pending), and no scan, hand-over or mark of the hold brought that
// version or a later one (so none of its items was handed out already, and acked since,
// its record forgotten). A source's first commit is not taken from a mark: a new hold knows
// nothing, and the scans it sent may have read it.
func (s *sources) mayTakeMark(src string, version, gen int64) bool {
	if _, ok := s.soiled[src]; ok || version < 2 || gen < s.since {
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
// a scan, and the items of a mark are taken only when its commit was sent after now (a
// generation drawn now, which the session publishes).
func (s *sources) forgetAll() {
	clear(s.known)
	clear(s.read)
	s.since = s.gens.next()
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
