"""Active-active regions (issue 18): the pure core. See docs/design/active-active.md."""
