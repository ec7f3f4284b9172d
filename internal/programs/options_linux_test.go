package programs

import (
	"os"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/backend/native"
)

// TestBuildOptions: a C++ program that uses OpenSSL's MD5 links with
// -lcrypto, and the options count in the build cache's key.
func TestBuildOptions(t *testing.T) {
	needLanguage(t, "cpp")
	if _, err := os.Stat("/usr/include/openssl/md5.h"); err != nil {
		t.Skip("needs OpenSSL's headers (Debian's libssl-dev, which scripts/deps installs)")
	}
	sb := newSandbox(t, newBackend(t), native.Spec{})
	md5 := []byte(`#include <openssl/md5.h>
#include <cstdio>
int main() {
    unsigned char d[MD5_DIGEST_LENGTH];
    MD5((const unsigned char *)"abc", 3, d);
    for (unsigned char c : d) std::printf("%02x", c);
    std::printf("\n");
}
`)
	p := Program{Language: lng("cpp"), Code: md5, Name: "md5.cpp", BuildOptions: []string{"-Wno-deprecated-declarations"}}
	if o := run(t, sb.Agent, p); o.res.Phase != PhaseCompile {
		t.Errorf("without -lcrypto: %v; want a link error", o)
	}
	p.BuildOptions = append(p.BuildOptions, "-std=c++17", "-lcrypto")
	if o := run(t, sb.Agent, p); o.res.Phase != PhaseRun || o.stdout != "900150983cd24fb0d6963f7d28e17f72\n" {
		t.Errorf("with -lcrypto: %v; want abc's MD5", o)
	}

	// The same code with other options is another build.
	def := Program{Language: lng("c"), Code: []byte("#include <stdio.h>\nint main(void) { printf(\"%d\\n\", V); }\n")}
	for _, v := range []string{"1", "2", "1"} {
		def.BuildOptions = []string{"-DV=" + v}
		o := run(t, sb.Agent, def)
		if strings.TrimSpace(o.stdout) != v {
			t.Errorf("-DV=%s: %v; want it printed", v, o)
		}
		if v == "2" && o.res.Cached {
			t.Errorf("-DV=2 after -DV=1 was cached; want a new build")
		}
	}
	if o := run(t, sb.Agent, def); !o.res.Cached {
		t.Errorf("the same options again: not cached; want the cached build")
	}
}
