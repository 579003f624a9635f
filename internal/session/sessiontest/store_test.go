package sessiontest

import (
	"testing"

	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/session/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) session.Store { return NewStore() })
}
