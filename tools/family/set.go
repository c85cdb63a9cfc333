package family

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/tools"
)

// Set is the families of one daemon, walked phase by phase in the order
// given (Close in reverse). Each phase runs at most once; RunEnded runs for
// every run that ends.
type Set struct {
	list []Family

	// mu guards registered, which lists the families whose Register
	// succeeded: only they get the later phases.
	mu         sync.Mutex
	registered []Family
}

// NewSet returns the set of fs, in that order.
func NewSet(fs ...Family) *Set { return &Set{list: fs} }

// Validate is a config check (config.Load's argument): every family's
// section, the first problem returned.
func (s *Set) Validate(cfg *config.Config) error {
	for _, f := range s.list {
		if err := f.Validate(cfg); err != nil {
			return err
		}
	}
	return nil
}

// Register registers every family through setup. On an error the families
// registered before it are closed and the error names the family.
func (s *Set) Register(setup *Setup) error {
	for _, f := range s.list {
		if err := f.Register(setup); err != nil {
			s.Close()
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
		s.mu.Lock()
		s.registered = append(s.registered, f)
		s.mu.Unlock()
	}
	return nil
}

// Collectors returns the registered families' metrics.
func (s *Set) Collectors() []prometheus.Collector {
	var cs []prometheus.Collector
	for _, f := range s.snapshot() {
		if c := f.Collector(); c != nil {
			cs = append(cs, c)
		}
	}
	return cs
}

// Start starts every registered family with the API's handler.
func (s *Set) Start(ctx context.Context, api http.Handler) error {
	for _, f := range s.snapshot() {
		if err := f.Start(ctx, api); err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
	}
	return nil
}

// RunEnded tells every registered family that r ended.
func (s *Set) RunEnded(r tools.Run) {
	for _, f := range s.snapshot() {
		f.RunEnded(r)
	}
}

// Drain drains every registered family, all at once, bounded by ctx.
func (s *Set) Drain(ctx context.Context) {
	var wg sync.WaitGroup
	for _, f := range s.snapshot() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.Drain(ctx)
		}()
	}
	wg.Wait()
}

// Close closes the registered families in reverse order and forgets them,
// so a second Close does nothing. The errors are joined, each naming its
// family.
func (s *Set) Close() error {
	s.mu.Lock()
	fs := s.registered
	s.registered = nil
	s.mu.Unlock()
	var errs []error
	for i := len(fs) - 1; i >= 0; i-- {
		if err := fs[i].Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", fs[i].Name(), err))
		}
	}
	return errors.Join(errs...)
}

func (s *Set) snapshot() []Family {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Family(nil), s.registered...)
}
