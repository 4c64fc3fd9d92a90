package embedded

import (
	"runtime/debug"
	"strings"
	"sync"

	"github.com/FerretDB/FerretDB/build/version"
)

// ferretDBModule is the module the embedded FerretDB is built from.
const ferretDBModule = "github.com/FerretDB/FerretDB"

// stampVersion makes FerretDB report the release it is built from. An embedded FerretDB 1.x
// reports "unknown" in buildInfo's ferretdbVersion (and serverStatus'): it reads its release
// only from files generated for its own builds. The module version this binary was built with
// is that release.
var stampVersion = sync.OnceFunc(func() {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	for _, dep := range info.Deps {
		if dep.Path != ferretDBModule {
			continue
		}
		if dep.Replace != nil {
			dep = dep.Replace
		}
		if strings.HasPrefix(dep.Version, "v") && version.Get().Version == "unknown" {
			version.Get().Version = dep.Version
		}
	}
})
