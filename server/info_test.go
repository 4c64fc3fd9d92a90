package server

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Info prints as one short line naming the server, its versions and the profile in use,
// leaving out what the server did not report.
func TestInfoString(t *testing.T) {
	for want, info := range map[string]Info{
		"FerretDB 1.24.2 (MongoDB 7.0.42 wire 21, profile ferretdb)": {Profile: FerretDB, Family: FamilyFerretDB1,
			Version: "7.0.42", MaxWireVersion: 21, FerretDBVersion: "v1.24.2"},
		"FerretDB 1.x, release not reported (MongoDB 7.0.42 wire 21, profile ferretdb)": {Profile: FerretDB,
			Family: FamilyFerretDB1, Version: "7.0.42", MaxWireVersion: 21, FerretDBVersion: "unknown"},
		"FerretDB 2.5.0 (MongoDB 7.0.77 wire 21, profile mongodb)": {Profile: MongoDB, Family: FamilyFerretDB2,
			Version: "7.0.77", MaxWireVersion: 21, FerretDBVersion: "v2.5.0",
			Probes: []Probe{{Feature: ExpressionProjections, Served: true}}},
		"MongoDB 8.0.4 (wire 25, profile mongodb)": {Profile: MongoDB, Family: FamilyMongoDB, Version: "8.0.4", MaxWireVersion: 25},
		"MongoDB (wire 25, profile mongodb)":       {Profile: MongoDB, Family: FamilyMongoDB, MaxWireVersion: 25},
		"DocumentDB (wire 21, profile mongodb)":    {Profile: MongoDB, Family: FamilyDocumentDB, MaxWireVersion: 21},
		"unknown server (profile detect)":          {},
		"Azure Cosmos DB for MongoDB (MongoDB 4.2.0 wire 8, profile ferretdb)": {Profile: FerretDB, Family: FamilyCosmosDB,
			Version: "4.2.0", MaxWireVersion: 8},
	} {
		assert.Equal(t, want, info.String())
		assert.Equal(t, want, fmt.Sprint(info), "fmt prints the line")
	}
}
