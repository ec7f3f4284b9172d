package programs

// The compatibility suite's programs, one set per language. Each program's
// expected behaviour is in suite's doc comment; every language must pass the
// same cases.

// suite is one language's programs.
type suite struct {
	lang       string
	hello      string // prints "hello, world"
	unicode    string // prints unicodeLine
	echo       string // copies stdin to stdout
	args       string // prints each argument on a line of its own
	exit3      string // exits with status 3
	syntax     string // fails to compile (or its syntax check) ...
	syntaxLine int    // ... with an error on this line
	crash      string // fails at run time ...
	crashWant  string // ... with stderr matching this, or, if empty, a nonzero status or a signal
	read       string // prints the contents of data.txt
	write      string // writes "artifact\n" to out.txt
	loop       string // loops forever unless it has an argument; then prints "stopped"
	flood      string // prints forever
	multi      []File // a program in several files (the entry is the default one) ...
	multiWant  string // ... and what it prints
}

const unicodeLine = "héllo wörld ✓ 日本"

var suites = []suite{
	{
		lang:    "c",
		hello:   "#include <stdio.h>\nint main(void) { printf(\"hello, world\\n\"); return 0; }\n",
		unicode: "#include <stdio.h>\nint main(void) { puts(\"" + unicodeLine + "\"); return 0; }\n",
		echo:    "#include <stdio.h>\nint main(void) { int c; while ((c = getchar()) != EOF) putchar(c); return 0; }\n",
		args:    "#include <stdio.h>\nint main(int argc, char **argv) { for (int i = 1; i < argc; i++) puts(argv[i]); return 0; }\n",
		exit3:   "int main(void) { return 3; }\n",
		syntax: "#include <stdio.h>\n" +
			"int main(void) {\n" +
			"    int x = ;\n" +
			"    return 0;\n" +
			"}\n",
		syntaxLine: 3,
		crash: "int main(int argc, char **argv) {\n" +
			"    volatile int zero = argc - 1;\n" +
			"    return 10 / zero;\n" +
			"}\n",
		read:  "#include <stdio.h>\nint main(void) { FILE *f = fopen(\"data.txt\", \"r\"); if (!f) return 1; int c; while ((c = fgetc(f)) != EOF) putchar(c); return 0; }\n",
		write: "#include <stdio.h>\nint main(void) { FILE *f = fopen(\"out.txt\", \"w\"); if (!f) return 1; fputs(\"artifact\\n\", f); return fclose(f) != 0; }\n",
		loop:  "#include <stdio.h>\nint main(int argc, char **argv) { volatile unsigned long n = 0; while (argc < 2) n++; puts(\"stopped\"); return 0; }\n",
		flood: "#include <stdio.h>\nint main(void) { for (;;) fputs(\"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\\n\", stdout); }\n",
		multi: []File{
			{Path: "main.c", Data: []byte("#include <stdio.h>\n#include \"twice.h\"\nint main(void) { printf(\"multi %d\\n\", twice(21)); return 0; }\n")},
			{Path: "twice.c", Data: []byte("#include \"twice.h\"\nint twice(int n) { return 2 * n; }\n")},
			{Path: "twice.h", Data: []byte("int twice(int n);\n")},
		},
		multiWant: "multi 42\n",
	},
	{
		lang:    "cpp",
		hello:   "#include <iostream>\nint main() { std::cout << \"hello, world\" << std::endl; }\n",
		unicode: "#include <iostream>\nint main() { std::cout << \"" + unicodeLine + "\\n\"; }\n",
		echo:    "#include <iostream>\nint main() { std::cout << std::cin.rdbuf(); }\n",
		args:    "#include <iostream>\nint main(int argc, char **argv) { for (int i = 1; i < argc; i++) std::cout << argv[i] << '\\n'; }\n",
		exit3:   "int main() { return 3; }\n",
		syntax: "#include <string>\n" +
			"int main() {\n" +
			"    std::string s = 42 +;\n" +
			"}\n",
		syntaxLine: 3,
		crash: "#include <vector>\n" +
			"int main() {\n" +
			"    std::vector<int> v(3);\n" +
			"    return v.at(10);\n" +
			"}\n",
		read:  "#include <fstream>\n#include <iostream>\nint main() { std::ifstream f(\"data.txt\"); if (!f) return 1; std::cout << f.rdbuf(); }\n",
		write: "#include <fstream>\nint main() { std::ofstream f(\"out.txt\"); f << \"artifact\\n\"; return !f; }\n",
		loop:  "#include <iostream>\nint main(int argc, char **) { volatile unsigned long n = 0; while (argc < 2) n = n + 1; std::cout << \"stopped\\n\"; }\n",
		flood: "#include <iostream>\nint main() { for (;;) std::cout << \"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\\n\"; }\n",
		multi: []File{
			{Path: "main.cpp", Data: []byte("#include <iostream>\n#include \"greeter.hpp\"\nint main() { Greeter g{\"multi\"}; std::cout << g.greet() << '\\n'; }\n")},
			{Path: "greeter.cpp", Data: []byte("#include \"greeter.hpp\"\nstd::string Greeter::greet() const { return name + \" 42\"; }\n")},
			{Path: "greeter.hpp", Data: []byte("#pragma once\n#include <string>\nstruct Greeter { std::string name; std::string greet() const; };\n")},
		},
		multiWant: "multi 42\n",
	},
	{
		lang:    "fortran",
		hello:   "program hello\n  print '(a)', 'hello, world'\nend program hello\n",
		unicode: "program u\n  print '(a)', '" + unicodeLine + "'\nend program u\n",
		echo:    "program echo\n  character(len=1000) :: line\n  integer :: ios\n  do\n    read(*, '(a)', iostat=ios) line\n    if (ios /= 0) exit\n    print '(a)', trim(line)\n  end do\nend program echo\n",
		args:    "program args\n  integer :: i\n  character(len=200) :: a\n  do i = 1, command_argument_count()\n    call get_command_argument(i, a)\n    print '(a)', trim(a)\n  end do\nend program args\n",
		exit3:   "program e\n  stop 3\nend program e\n",
		syntax: "program p\n" +
			"  integer :: x\n" +
			"  x = 1 +\n" +
			"  print *, x\n" +
			"end program p\n",
		syntaxLine: 3,
		crash: "program c\n" +
			"  integer :: n\n" +
			"  open(unit=10, file='missing.txt', status='old')\n" +
			"  read(10, *) n\n" +
			"end program c\n",
		crashWant: `At line 3 of file main\.f90`,
		read:      "program r\n  character(len=1000) :: line\n  integer :: ios\n  open(unit=10, file='data.txt', status='old')\n  do\n    read(10, '(a)', iostat=ios) line\n    if (ios /= 0) exit\n    print '(a)', trim(line)\n  end do\nend program r\n",
		write:     "program w\n  open(unit=10, file='out.txt', status='replace')\n  write(10, '(a)') 'artifact'\n  close(10)\nend program w\n",
		loop:      "program l\n  integer(8) :: n\n  n = 0\n  do while (command_argument_count() == 0)\n    n = n + 1\n  end do\n  print '(a)', 'stopped'\nend program l\n",
		flood:     "program f\n  do\n    print '(a)', 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy'\n  end do\nend program f\n",
		// a.f90 uses b.f90's module: in name order gfortran would fail.
		multi: []File{
			{Path: "main.f90", Data: []byte("program main\n  use a_mod\n  print '(a,i0)', 'multi ', twice(21)\nend program main\n")},
			{Path: "a.f90", Data: []byte("module a_mod\n  use b_mod\ncontains\n  integer function twice(n)\n    integer, intent(in) :: n\n    twice = n * two\n  end function twice\nend module a_mod\n")},
			{Path: "b.f90", Data: []byte("module b_mod\n  integer, parameter :: two = 2\nend module b_mod\n")},
		},
		multiWant: "multi 42\n",
	},
	{
		lang:    "go",
		hello:   "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello, world\") }\n",
		unicode: "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"" + unicodeLine + "\") }\n",
		echo:    "package main\n\nimport (\n\t\"io\"\n\t\"os\"\n)\n\nfunc main() { io.Copy(os.Stdout, os.Stdin) }\n",
		args:    "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() {\n\tfor _, a := range os.Args[1:] {\n\t\tfmt.Println(a)\n\t}\n}\n",
		exit3:   "package main\n\nimport \"os\"\n\nfunc main() { os.Exit(3) }\n",
		syntax: "package main\n" +
			"\n" +
			"func main() {\n" +
			"\tx := 1\n" +
			"}\n",
		syntaxLine: 4,
		crash: "package main\n" +
			"\n" +
			"func main() {\n" +
			"\ts := []int{1, 2, 3}\n" +
			"\ti := len(s) + 2\n" +
			"\tprintln(s[i])\n" +
			"}\n",
		crashWant: `main\.go:6`,
		read:      "package main\n\nimport (\n\t\"os\"\n)\n\nfunc main() {\n\tb, err := os.ReadFile(\"data.txt\")\n\tif err != nil {\n\t\tpanic(err)\n\t}\n\tos.Stdout.Write(b)\n}\n",
		write:     "package main\n\nimport \"os\"\n\nfunc main() {\n\tif err := os.WriteFile(\"out.txt\", []byte(\"artifact\\n\"), 0o644); err != nil {\n\t\tpanic(err)\n\t}\n}\n",
		loop:      "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() {\n\tfor len(os.Args) < 2 {\n\t}\n\tfmt.Println(\"stopped\")\n}\n",
		flood:     "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfor {\n\t\tfmt.Println(\"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\")\n\t}\n}\n",
		// Two files of package main and a package in a subdirectory of the
		// go.mod that kiln writes ("module main").
		multi: []File{
			{Path: "main.go", Data: []byte("package main\n\nimport (\n\t\"fmt\"\n\n\t\"main/twice\"\n)\n\nfunc main() { fmt.Println(name(), twice.Of(21)) }\n")},
			{Path: "name.go", Data: []byte("package main\n\nfunc name() string { return \"multi\" }\n")},
			{Path: "twice/twice.go", Data: []byte("package twice\n\nfunc Of(n int) int { return 2 * n }\n")},
			// A project with packages brings its module: kiln writes none.
			{Path: "go.mod", Data: []byte("module main\n")},
		},
		multiWant: "multi 42\n",
	},
	{
		lang:    "java",
		hello:   "public class Main {\n    public static void main(String[] args) {\n        System.out.println(\"hello, world\");\n    }\n}\n",
		unicode: "public class Main {\n    public static void main(String[] args) {\n        System.out.println(\"" + unicodeLine + "\");\n    }\n}\n",
		echo:    "public class Main {\n    public static void main(String[] args) throws Exception {\n        System.in.transferTo(System.out);\n    }\n}\n",
		args:    "public class Main {\n    public static void main(String[] args) {\n        for (String a : args) System.out.println(a);\n    }\n}\n",
		exit3:   "public class Main {\n    public static void main(String[] args) {\n        System.exit(3);\n    }\n}\n",
		syntax: "public class Main {\n" +
			"    public static void main(String[] args) {\n" +
			"        int x = 1\n" +
			"    }\n" +
			"}\n",
		syntaxLine: 3,
		crash: "public class Main {\n" +
			"    public static void main(String[] args) {\n" +
			"        int zero = args.length;\n" +
			"        System.out.println(10 / zero);\n" +
			"    }\n" +
			"}\n",
		crashWant: `Main\.java:4`,
		read:      "import java.nio.file.*;\n\npublic class Main {\n    public static void main(String[] args) throws Exception {\n        System.out.print(Files.readString(Path.of(\"data.txt\")));\n    }\n}\n",
		write:     "import java.nio.file.*;\n\npublic class Main {\n    public static void main(String[] args) throws Exception {\n        Files.writeString(Path.of(\"out.txt\"), \"artifact\\n\");\n    }\n}\n",
		loop:      "public class Main {\n    public static void main(String[] args) {\n        long n = 0;\n        while (args.length == 0) n++;\n        System.out.println(\"stopped\");\n    }\n}\n",
		flood:     "public class Main {\n    public static void main(String[] args) {\n        while (true) System.out.println(\"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\");\n    }\n}\n",
		// A class in a second file, and one in a package directory.
		multi: []File{
			{Path: "Main.java", Data: []byte("import util.Twice;\n\npublic class Main {\n    public static void main(String[] args) {\n        System.out.println(Greeter.name() + \" \" + Twice.of(21));\n    }\n}\n")},
			{Path: "Greeter.java", Data: []byte("class Greeter {\n    static String name() { return \"multi\"; }\n}\n")},
			{Path: "util/Twice.java", Data: []byte("package util;\n\npublic class Twice {\n    public static int of(int n) { return 2 * n; }\n}\n")},
		},
		multiWant: "multi 42\n",
	},
	{
		lang:    "php",
		hello:   "<?php\necho \"hello, world\\n\";\n",
		unicode: "<?php\necho \"" + unicodeLine + "\\n\";\n",
		echo:    "<?php\necho stream_get_contents(STDIN);\n",
		args:    "<?php\nforeach (array_slice($argv, 1) as $a) {\n    echo $a, \"\\n\";\n}\n",
		exit3:   "<?php\nexit(3);\n",
		syntax: "<?php\n" +
			"echo \"a\";\n" +
			"$x = ;\n",
		syntaxLine: 3,
		crash: "<?php\n" +
			"$zero = count($argv) - 1;\n" +
			"echo intdiv(10, $zero), \"\\n\";\n",
		crashWant: `main\.php:3`,
		read:      "<?php\necho file_get_contents('data.txt');\n",
		write:     "<?php\nfile_put_contents('out.txt', \"artifact\\n\");\n",
		loop:      "<?php\n$n = 0;\nwhile (count($argv) < 2) {\n    $n++;\n}\necho \"stopped\\n\";\n",
		flood:     "<?php\nwhile (true) {\n    echo \"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\\n\";\n}\n",
		multi: []File{
			{Path: "main.php", Data: []byte("<?php\nrequire __DIR__ . '/lib/twice.php';\necho 'multi ', twice(21), \"\\n\";\n")},
			{Path: "lib/twice.php", Data: []byte("<?php\nfunction twice(int $n): int { return 2 * $n; }\n")},
		},
		multiWant: "multi 42\n",
	},
	{
		lang:    "ruby",
		hello:   "puts \"hello, world\"\n",
		unicode: "puts \"" + unicodeLine + "\"\n",
		echo:    "$stdout.write($stdin.read)\n",
		args:    "ARGV.each { |a| puts a }\n",
		exit3:   "exit 3\n",
		syntax: "puts 1\n" +
			"x = (1 +\n" +
			"end\n",
		syntaxLine: 3,
		crash: "zero = ARGV.size\n" +
			"puts 10 / zero\n",
		crashWant: `main\.rb:2`,
		read:      "print File.read(\"data.txt\")\n",
		write:     "File.write(\"out.txt\", \"artifact\\n\")\n",
		loop:      "n = 0\nn += 1 while ARGV.empty?\nputs \"stopped\"\n",
		flood:     "loop { puts \"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\" }\n",
		multi: []File{
			{Path: "main.rb", Data: []byte("require_relative \"lib/twice\"\nputs \"multi #{Twice.of(21)}\"\n")},
			{Path: "lib/twice.rb", Data: []byte("module Twice\n  def self.of(n) = 2 * n\nend\n")},
		},
		multiWant: "multi 42\n",
	},
	{
		lang:    "rust",
		hello:   "fn main() {\n    println!(\"hello, world\");\n}\n",
		unicode: "fn main() {\n    println!(\"" + unicodeLine + "\");\n}\n",
		echo:    "fn main() {\n    std::io::copy(&mut std::io::stdin(), &mut std::io::stdout()).unwrap();\n}\n",
		args:    "fn main() {\n    for a in std::env::args().skip(1) {\n        println!(\"{}\", a);\n    }\n}\n",
		exit3:   "fn main() {\n    std::process::exit(3);\n}\n",
		syntax: "fn main() {\n" +
			"    let x: i32 = \"a\";\n" +
			"}\n",
		syntaxLine: 2,
		crash: "fn main() {\n" +
			"    let v = vec![1, 2, 3];\n" +
			"    let i = v.len() + std::env::args().count();\n" +
			"    println!(\"{}\", v[i]);\n" +
			"}\n",
		crashWant: `main\.rs:4`,
		read:      "fn main() {\n    print!(\"{}\", std::fs::read_to_string(\"data.txt\").unwrap());\n}\n",
		write:     "fn main() {\n    std::fs::write(\"out.txt\", \"artifact\\n\").unwrap();\n}\n",
		loop:      "fn main() {\n    let mut n: u64 = 0;\n    while std::env::args().len() < 2 {\n        n = n.wrapping_add(1);\n    }\n    println!(\"stopped{}\", if n == u64::MAX { \"!\" } else { \"\" });\n}\n",
		flood:     "use std::io::Write;\n\nfn main() {\n    let mut out = std::io::stdout();\n    loop {\n        if out.write_all(b\"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\\n\").is_err() {\n            return;\n        }\n    }\n}\n",
		multi: []File{
			{Path: "main.rs", Data: []byte("mod twice;\n\nfn main() {\n    println!(\"multi {}\", twice::of(21));\n}\n")},
			{Path: "twice.rs", Data: []byte("pub fn of(n: i32) -> i32 {\n    2 * n\n}\n")},
		},
		multiWant: "multi 42\n",
	},
}
