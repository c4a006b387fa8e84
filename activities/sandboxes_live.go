package activities

// Live is how many sandboxes this worker holds open now (the nexo_sandboxes_live gauge).
func (s *Sandboxes) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}
