// Package client is the Go client of a kiln server's HTTP API, and the
// API's types. It is the only package of the module meant for import.
//
// Every request carries an API key as "Authorization: Bearer KEY". Errors
// come back as *Problem (application/problem+json) with a stable Code.
// {path} is a workspace path with each name percent-escaped on its own;
// the client never cleans it (see the note in files.go). A duration's name
// carries its unit: timeout_ms, usage.wall_ms and usage.cpu_ms (numbers with
// microsecond precision), idle_ttl_seconds, retry_after_seconds. A path that
// exists answers another method with 405 method_not_allowed and Allow.
//
// The API, under /v1 (the OpenAPI 3 document is at /v1/openapi.json):
//
//	GET    /v1/health/live                  liveness (no key)
//	GET    /v1/health/ready                 readiness (no key)
//	GET    /v1/openapi.json                 this API (no key)
//	GET    /metrics                         Prometheus metrics (admin key or a "metrics" scoped key; no key on kiln serve --metrics-addr)
//	GET    /v1/languages                    []Language
//	GET    /v1/environments                 []Environment: the administrator's, built or not
//	POST   /v1/environments/{name}/build    -> EnvironmentBuild (201 built, 200 already built; admin)
//	POST   /v1/run                          RunRequest -> RunResult
//	POST   /v1/batches                      BatchRequest (at most 5000 items) -> Batch (202); with
//	                                        "Accept: text/event-stream", a stream of BatchEvent
//	GET    /v1/batches/{id}                 Batch
//	GET    /v1/batches/{id}/items           ?limit=&cursor= -> BatchItemList
//	POST   /v1/sessions                     SessionRequest -> Session (201)
//	GET    /v1/sessions                     ?status=&metadata.KEY=VALUE&limit=&cursor= -> SessionList:
//	                                        the caller's own and those shared with the caller, each with role
//	GET    /v1/sessions/{id}                Session
//	DELETE /v1/sessions/{id}                ends it (204)
//	PATCH  /v1/sessions/{id}                SessionUpdate -> Session (owner; renames it)
//	GET    /v1/sessions/{id}/export         ?format=html -> the saved web notebook as one HTML file
//	                                        (attachment; images inline, no script)
//	POST   /v1/sessions/{id}/complete       CompleteRequest -> Completion (owner; the kernel's completions)
//	POST   /v1/sessions/{id}/format         FormatRequest -> Formatted (owner, collaborator; the language's
//	                                        formatter run in the sandbox)
//	GET    /v1/sessions/{id}/git/status     GitStatus: the workspace as a git repository (git runs in the sandbox)
//	POST   /v1/sessions/{id}/git/init       GitStatus (owner, collaborator)
//	GET    /v1/sessions/{id}/git/diff       ?path=&staged= -> GitDiff
//	POST   /v1/sessions/{id}/git/stage      GitStageRequest -> GitStatus (owner, collaborator)
//	POST   /v1/sessions/{id}/git/unstage    GitStageRequest -> GitStatus (owner, collaborator)
//	POST   /v1/sessions/{id}/git/commit     GitCommitRequest -> GitCommit (201; owner, collaborator)
//	GET    /v1/sessions/{id}/git/log        ?limit= -> GitLog
//	POST   /v1/sessions/{id}/git/restore    GitRestoreRequest -> GitStatus (a file as it was in a commit)
//	POST   /v1/sessions/{id}/git/bundle     GitBundleRequest -> GitStatus (a new repository from a bundle file)
//	POST   /v1/sessions/{id}/interrupt      stops the running cell (204)
//	POST   /v1/sessions/{id}/restart        ?language= restarts kernels, keeps files (204)
//	PUT    /v1/sessions/{id}/network        NetworkPolicy -> Session (owner; within the server's ceiling
//	                                        unless an admin)
//	POST   /v1/sessions/{id}/packages       PackageRequest -> PackageResult; with
//	                                        "Accept: text/event-stream", a stream of Event
//	POST   /v1/sessions/{id}/executions     ExecRequest -> Execution; with
//	                                        "Accept: text/event-stream", a stream of Event
//	GET    /v1/sessions/{id}/executions     ?limit=&cursor= -> ExecutionList
//	GET    /v1/sessions/{id}/ws             WebSocket: WSMessage in, Event out
//	GET    /v1/sessions/{id}/terminal       ?rows=&cols= WebSocket to a shell on a pty in the sandbox:
//	                                        bytes in binary frames, resize/exit in JSON text frames
//	GET    /v1/sessions/{id}/events         a stream of Event (SSE) of every user's cells, with execution_id
//	GET    /v1/sessions/{id}/shares         ShareList (owner)
//	PUT    /v1/sessions/{id}/shares/{user_id}  ShareRequest -> Share (201, or 200 when the role changed; owner)
//	DELETE /v1/sessions/{id}/shares/{user_id}  revokes it: 404 for that user from the next request (204)
//	GET    /v1/executions/{id}              Execution
//	GET    /v1/sessions/{id}/files          the workspace root's FileList
//	GET    /v1/sessions/{id}/files/{path}   a file's bytes; a directory's FileList;
//	                                        ?stat=true -> FileInfo; ?archive=zip|tar on a directory
//	PUT    /v1/sessions/{id}/files/{path}   the raw body becomes the file (201, or 200 when
//	                                        replaced) -> FileInfo; ?overwrite=false -> 409 if it exists;
//	                                        missing parent folders are made
//	POST   /v1/sessions/{id}/files/{path}   multipart/form-data files (parts named "file") into
//	                                        the directory, or ?extract=zip|tar with an archive
//	                                        body -> Uploaded (201); an empty {path} (".../files/") is
//	                                        the workspace root
//	DELETE /v1/sessions/{id}/files/{path}   ?recursive=true for a non-empty directory (204)
//	POST   /v1/sessions/{id}/mkdir          {"path": "..."} -> FileInfo (201)
//	POST   /v1/sessions/{id}/move           MoveRequest -> FileInfo
//	POST   /v1/users                        UserRequest -> User (201, admin)
//	GET    /v1/users                        []User (admin)
//	GET    /v1/users/{id}                   User ("me" is the caller)
//	GET    /v1/users/{id}/usage             UserUsage: budgets used and limits
//	POST   /v1/users/{id}/keys              KeyRequest -> Key with Secret (201)
//	GET    /v1/users/{id}/keys              []Key
//	DELETE /v1/users/{id}/keys/{key}        revokes it (204)
//	GET    /v1/audit                        ?user=&session=&actor=&limit=&cursor= -> AuditList (admin)
//	GET    /v1/tools                        ?format=openai|anthropic -> kiln's tools as function definitions
//	POST   /v1/tools/call                   ToolCall -> ToolCallResult, ready to hand back to the model
//
// kiln serve also serves MCP (streamable HTTP, the same bearer key) at
// /mcp, with the same tools.
package client
