// Package nfsd is the file server of a job VM's migratable share: an NFSv3
// and MOUNT v3 server (RFC 1813, ONC RPC over TCP) that gives one job's
// guest the host's tree read-only and the job's shared paths read-write,
// acting as the job's user.
//
// (Design notes and the comparison with nfs-ganesha: see below.)
package nfsd
