// Package archtest holds the test of the import rules drawn in
// docs/architecture.md: the package table there is the rule book (one row
// per package or pattern of packages, and what it may import), and
// TestImportRules reads it and holds every package of the module to its
// row, so the map and the code cannot drift apart.
package archtest
