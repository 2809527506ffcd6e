// Package list reads the ranked domain lists a survey runs over: a list
// file (CSV rank,domain or one domain a line, plain or zipped) parsed,
// normalised (IDNA) and deduplicated into a DomainList, which keeps a
// top-1M list in about a byte a domain and its names in a temporary file
// past a threshold; and the Tranco list, downloaded by ID and cached.
package list
