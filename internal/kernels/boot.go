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
		loader := pythonLoader
		if strings.HasSuffix(s.Argv[0], "/node") {
			loader = nodeLoader
		}
		parts := s.Argv[i+1:]
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
