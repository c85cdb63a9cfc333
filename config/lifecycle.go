package config

import (
	"fmt"
	"time"
)

// Lifecycle is what idleness does to a sandbox created without a lifecycle
// of its own: after pause_after without a call, process output or preview
// request it is paused, after hibernate_after hibernated, after
// delete_after deleted. Zero (or left out) is never. The keys take Go
// durations ("10m", "2h").
type Lifecycle struct {
	PauseAfter     Duration `yaml:"pause_after"`
	HibernateAfter Duration `yaml:"hibernate_after"`
	DeleteAfter    Duration `yaml:"delete_after"`
}

// LifecycleFor is the tenant's default lifecycle: each key of the tenant's
// own section that is set, else the deployment's.
func (c *Config) LifecycleFor(tenant string) Lifecycle {
	l := c.Lifecycle
	for _, t := range c.Tenants {
		if t.Name != tenant || t.Lifecycle == nil {
			continue
		}
		if t.Lifecycle.PauseAfter != 0 {
			l.PauseAfter = t.Lifecycle.PauseAfter
		}
		if t.Lifecycle.HibernateAfter != 0 {
			l.HibernateAfter = t.Lifecycle.HibernateAfter
		}
		if t.Lifecycle.DeleteAfter != 0 {
			l.DeleteAfter = t.Lifecycle.DeleteAfter
		}
	}
	return l
}

// checkLifecycles checks the lifecycle sections.
func (c *Config) checkLifecycles() error {
	if err := c.Lifecycle.check("lifecycle"); err != nil {
		return err
	}
	for i, t := range c.Tenants {
		if t.Lifecycle != nil {
			if err := t.Lifecycle.check(fmt.Sprintf("tenants[%d].lifecycle", i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l Lifecycle) check(key string) error {
	for _, f := range []struct {
		name string
		d    Duration
	}{{"pause_after", l.PauseAfter}, {"hibernate_after", l.HibernateAfter}, {"delete_after", l.DeleteAfter}} {
		switch {
		case f.d < 0:
			return fmt.Errorf("%s.%s: %s is negative; give how long a sandbox may be idle first, or leave it out for never", key, f.name, f.d.D())
		case f.d > 0 && f.d.D() < time.Second:
			return fmt.Errorf("%s.%s: %s is under a second; idleness is counted in seconds", key, f.name, f.d.D())
		}
	}
	return nil
}
