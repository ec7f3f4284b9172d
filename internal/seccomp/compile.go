package seccomp

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"golang.org/x/net/bpf"
)

// arch is what the compiler needs to know about one architecture.
type arch struct {
	name  string
	audit uint32 // AUDIT_ARCH_* that seccomp_data.arch holds for native calls
	x32   bool   // whether to kill calls with __X32_SYSCALL_BIT set (amd64)
	// nums maps every name in Rules the architecture has to its number.
	nums map[string]uint32
	// absent lists the names in Rules the architecture does not have, so a
	// misspelt name is an error rather than a silent ENOSYS.
	absent []string
}

// Offsets into struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6];}.
// The filter reads only the low word of an argument, which comes first on
// little-endian machines (all the arches here).
const (
	offNr      = 0
	offArch    = 4
	offArgs    = 16
	seccompLen = 64 // sizeof(struct seccomp_data)

	x32Bit  = 0x40000000 // __X32_SYSCALL_BIT
	maxInsn = 4096       // BPF_MAXINSNS
)

func argOffset(i int) uint32 { return offArgs + 8*uint32(i) }

// compile turns the rules into a filter for one architecture.
//
// Layout: check the arch (and on amd64 the x32 bit), then a binary search
// over the system-call number whose leaves are either one return or the
// argument checks of one rule. Runs of numbers with the same plain verdict,
// including the default, share one leaf.
func compile(rules []Rule, a arch) ([]bpf.RawInstruction, error) {
	leaves, err := numberLeaves(rules, a)
	if err != nil {
		return nil, err
	}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.audit, SkipTrue: 1},
		bpf.RetConstant{Val: uint32(KillProcess)},
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if a.x32 {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpBitsNotSet, Val: x32Bit, SkipTrue: 1},
			bpf.RetConstant{Val: uint32(KillProcess)})
	}
	tree, err := searchTree(leaves)
	if err != nil {
		return nil, err
	}
	prog = append(prog, tree...)
	if len(prog) > maxInsn {
		return nil, fmt.Errorf("seccomp: %s filter has %d instructions, over the kernel's %d", a.name, len(prog), maxInsn)
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assemble %s filter: %w", a.name, err)
	}
	return raw, nil
}

// leaf covers the numbers from lo up to the next leaf's lo.
type leaf struct {
	lo   uint32
	rule Rule // Name is empty for numbers no rule names
}

func (l leaf) plain() bool { return len(l.rule.Conds) == 0 }

// numberLeaves resolves rule names to numbers and returns leaves covering
// every uint32, in order, with neighbours of equal plain verdict merged.
func numberLeaves(rules []Rule, a arch) ([]leaf, error) {
	byNr := make(map[uint32]Rule)
	seen := make(map[string]bool)
	for _, r := range rules {
		if seen[r.Name] {
			return nil, fmt.Errorf("seccomp: %q has two rules", r.Name)
		}
		seen[r.Name] = true
		nr, ok := a.nums[r.Name]
		if !ok {
			if slices.Contains(a.absent, r.Name) {
				continue
			}
			return nil, fmt.Errorf("seccomp: no number for %q on %s", r.Name, a.name)
		}
		if other, dup := byNr[nr]; dup {
			return nil, fmt.Errorf("seccomp: %q and %q share number %d on %s", other.Name, r.Name, nr, a.name)
		}
		byNr[nr] = r
	}
	for name := range a.nums {
		if !seen[name] {
			return nil, fmt.Errorf("seccomp: %s numbers %q, which has no rule", a.name, name)
		}
	}

	nrs := slices.Sorted(maps.Keys(byNr))
	def := Rule{Action: DefaultAction}
	var leaves []leaf
	add := func(l leaf) {
		if n := len(leaves); n > 0 && l.plain() && leaves[n-1].plain() && leaves[n-1].rule.Action == l.rule.Action {
			return // same verdict as the run before it
		}
		leaves = append(leaves, l)
	}
	next := uint64(0)
	for _, nr := range nrs {
		if uint64(nr) > next {
			add(leaf{lo: uint32(next), rule: def})
		}
		add(leaf{lo: nr, rule: byNr[nr]})
		next = uint64(nr) + 1
	}
	if next <= math.MaxUint32 {
		add(leaf{lo: uint32(next), rule: def})
	}
	return leaves, nil
}

// searchTree emits a binary search over leaves, with the number in A. Every
// path ends in a return, so subtrees can be laid out one after another.
func searchTree(leaves []leaf) ([]bpf.Instruction, error) {
	if len(leaves) == 1 {
		return leafCode(leaves[0].rule)
	}
	mid := len(leaves) / 2
	left, err := searchTree(leaves[:mid])
	if err != nil {
		return nil, err
	}
	right, err := searchTree(leaves[mid:])
	if err != nil {
		return nil, err
	}
	pivot := leaves[mid].lo
	var code []bpf.Instruction
	if len(left) <= math.MaxUint8 {
		code = append(code, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: pivot, SkipTrue: uint8(len(left))})
	} else {
		// Conditional jumps reach 255 instructions; a long one goes
		// through an unconditional jump.
		code = append(code,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: pivot, SkipFalse: 1},
			bpf.Jump{Skip: uint32(len(left))})
	}
	code = append(code, left...)
	return append(code, right...), nil
}

// leafCode emits one rule: its conditions in order, each ending in a return,
// and the rule's own action last.
func leafCode(r Rule) ([]bpf.Instruction, error) {
	var b block
	for _, c := range r.Conds {
		fail := b.label()
		for _, ch := range c.Checks {
			if ch.Arg < 0 || ch.Arg > 5 {
				return nil, fmt.Errorf("seccomp: %s: no argument %d", r.Name, ch.Arg)
			}
			b.emit(bpf.LoadAbsolute{Off: argOffset(ch.Arg), Size: 4})
			if ch.Mask != 0xffffffff {
				b.emit(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: ch.Mask})
			}
			if len(ch.Vals) == 0 {
				return nil, fmt.Errorf("seccomp: %s: a check with no values", r.Name)
			}
			pass := b.label()
			for i, v := range ch.Vals {
				last := i == len(ch.Vals)-1
				switch {
				case ch.Op == In && last:
					b.jumpEq(v, next, fail)
				case ch.Op == In:
					b.jumpEq(v, pass, next)
				default: // NotIn
					b.jumpEq(v, fail, next)
				}
			}
			b.place(pass)
		}
		b.emit(bpf.RetConstant{Val: uint32(c.Action)})
		b.place(fail)
	}
	b.emit(bpf.RetConstant{Val: uint32(r.Action)})
	code, err := b.resolve()
	if err != nil {
		return nil, fmt.Errorf("seccomp: %s: %w", r.Name, err)
	}
	return code, nil
}

// block assembles straight-line code with forward jumps to labels.
type block struct {
	code   []bpf.Instruction
	jumps  []jump // jeq instructions whose targets are labels
	labels []int  // label -> index of the instruction it marks
}

type jump struct{ at, jt, jf int }

// next is the label of the instruction right after a jump.
const next = -1

func (b *block) label() int {
	b.labels = append(b.labels, -1)
	return len(b.labels) - 1
}

func (b *block) place(l int) { b.labels[l] = len(b.code) }

func (b *block) emit(ins bpf.Instruction) { b.code = append(b.code, ins) }

func (b *block) jumpEq(val uint32, jt, jf int) {
	b.jumps = append(b.jumps, jump{at: len(b.code), jt: jt, jf: jf})
	b.emit(bpf.JumpIf{Cond: bpf.JumpEqual, Val: val})
}

func (b *block) resolve() ([]bpf.Instruction, error) {
	skip := func(at, l int) (uint8, error) {
		if l == next {
			return 0, nil
		}
		d := b.labels[l] - at - 1
		if b.labels[l] < 0 || d < 0 || d > math.MaxUint8 {
			return 0, fmt.Errorf("jump from %d to label %d out of range", at, l)
		}
		return uint8(d), nil
	}
	for _, j := range b.jumps {
		ins := b.code[j.at].(bpf.JumpIf)
		var err error
		if ins.SkipTrue, err = skip(j.at, j.jt); err != nil {
			return nil, err
		}
		if ins.SkipFalse, err = skip(j.at, j.jf); err != nil {
			return nil, err
		}
		b.code[j.at] = ins
	}
	return b.code, nil
}
