module kspike/probe

go 1.26.0
