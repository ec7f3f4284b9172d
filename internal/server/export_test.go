package server

// SpoolBytes is how many bytes of archive uploads s holds now, counted
// against MaxSpoolBytes. A test waits on it to know that an upload's bytes
// have been read without sending another upload to find out: a probe's
// own bytes would share the budget and could refuse the upload it waits
// for.
func (s *Server) SpoolBytes() int64 {
	s.spool.mu.Lock()
	defer s.spool.mu.Unlock()
	return s.spool.total
}
