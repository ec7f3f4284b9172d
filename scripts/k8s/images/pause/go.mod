module kspike/pause

go 1.26.0
