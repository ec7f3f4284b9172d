package kernels

import (
	"strconv"
	"strings"
)

// A kernel's source does not travel on its command line, where every `ps`
// on the host would print it (pages per sandbox): Boot swaps it for a
// loader of a few hundred bytes that reads the source, and the arguments
// after it, from fd 3 (the agent's channel) before the kernel says Ready.
// On fd 3 the agent first writes Payload: a header line of the parts'
// byte lengths, separated by spaces, then the parts, back to back.

// pythonLoader reads the payload, sets sys.argv[1:] to the arguments and
// runs the source as the -c program would (as __main__, in its globals).
const pythonLoader = `import os,sys
def r(n,b=b''):
 while len(b)<n:b+=os.read(3,n-len(b))or os._exit(1)
 return b
h=b''
while h[-1:]!=b'\n':h+=r(1)
p=[r(int(n)).decode()for n in h.split()]
sys.argv[1:]=p[1:]
exec(p[0])`

// pythonStage2 is a Python payload's first part, run by pythonLoader
// with the rest as its sys.argv[1:]: the source's code compiled on the
// host (compiled.go; as hex: its bytecode's magic number, then zlib of
// marshal's dump; or empty), the source, and the kernel's own arguments. It runs the code when the
// magic number is its interpreter's and compiles the source otherwise
// (also if the code does not load, e.g. an interpreter without zlib).
// It drops the loader's copies first, as the kernel never returns from
// exec, and zlib from sys.modules, which a fresh interpreter has not
// imported (zlib is built in: no file is read).
const pythonStage2 = `import marshal,_frozen_importlib_external as _e
c,s,*sys.argv[1:]=sys.argv[1:]
k=s
if c[:8]==_e.MAGIC_NUMBER.hex():
 try:import zlib;k=marshal.loads(zlib.decompress(bytes.fromhex(c[8:])));del sys.modules['zlib'],zlib
 except Exception:pass
del c,s,p,h,_e
exec(k)`

// nodeLoader reads the payload (fd 3 may be non-blocking) and runs the
// source as global code, as -e would (indirect eval); its own names are in
// a block, not globals a cell could collide with. Node kernels take no
// arguments.
const nodeLoader = `{const f=require('fs'),r=n=>{const b=Buffer.alloc(n);for(let o=0,k;o<n;o+=k)try{k=f.readSync(3,b,o,n-o)||process.exit(1)}catch(e){if(e.code!='EAGAIN')throw e;k=0}return b};let h='';while(!/\n/.test(h))h+=r(1);(0,eval)(''+r(parseInt(h)))}`

// Boot returns the kernel's command line with its inline source (the
// argument after -c or -e) replaced by a loader, and the payload the
// loader reads on fd 3: the source and the arguments after it. A spec
// without an inline source is returned as it is, with no payload.
func (s Spec) Boot() (argv []string, payload string) {
	for i, a := range s.Argv {
		if (a != "-c" && a != "-e") || i+1 >= len(s.Argv) {
			continue
		}
		loader, parts := pythonLoader, s.Argv[i+1:]
		if strings.HasSuffix(s.Argv[0], "/node") {
			loader = nodeLoader
		} else {
			parts = append([]string{pythonStage2, compiledCode(s.Argv[0], s.Argv[1:i], parts[0])}, parts...)
		}
		var head, body strings.Builder
		for j, p := range parts {
			if j > 0 {
				head.WriteByte(' ')
			}
			head.WriteString(strconv.Itoa(len(p)))
			body.WriteString(p)
		}
		argv = append(append([]string{}, s.Argv[:i+1]...), loader)
		return argv, head.String() + "\n" + body.String()
	}
	return s.Argv, ""
}
