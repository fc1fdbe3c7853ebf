module github.com/leaseq/leaseq/clients/go

go 1.19
