import Foundation
import Strata

// `.externalStorage` values between the store and the zone's parts (see
// `SyncReplica+External`): uploaded before the change that refers to them
// is pushed, downloaded before the change is applied. Memory holds one
// value and one request's parts (``Worker/transferBytes``) at a time,
// however many values a change refers to.

extension Worker {
    /// About how many bytes of parts one request carries.
    static let transferBytes = 8 << 20
    /// How many values one question about missing parts names.
    static let askBatch = 512

    /// Uploads the parts the zone lacks of the external values an outbox
    /// entry refers to.
    func uploadExternalValues(of payload: [UInt8]) async throws(SyncError) {
        guard SyncChangeSet.mentionsExternal(payload) else { return }
        let references: [ExternalReference]
        do {
            references = try SyncReplica.externalReferences(in: payload).filter { !uploaded.contains($0.digest) }
        } catch {
            throw SyncError(.store, "reading an outbox entry: \(error)")
        }
        var start = 0
        while start < references.count {
            let group = references[start..<min(start + Self.askBatch, references.count)]
            start += group.count
            let missing = try await server.missingParts(zone: zone, values: group.map { ($0.digest, $0.parts) })
            var wanted: [[UInt8]: [Int]] = [:]
            for (digest, part) in missing { wanted[digest, default: []].append(part) }
            var batch: [(digest: [UInt8], part: Int, bytes: [UInt8])] = []
            var size = 0
            for reference in group {
                guard let parts = wanted[reference.digest] else { continue }
                let value = try store({ try $0.outgoingValue(reference) }, "reading an external value to upload")
                guard let value, value.count == reference.length else {
                    throw SyncError(.store, "external value \(reference) to upload is not in the store")
                }
                for part in parts where part < reference.parts {
                    let bytes = Array(ExternalReference.part(part, of: value))
                    batch.append((reference.digest, part, bytes))
                    size += bytes.count
                    if size >= Self.transferBytes {
                        try await server.putParts(zone: zone, parts: batch)
                        batch = []
                        size = 0
                    }
                }
            }
            if !batch.isEmpty { try await server.putParts(zone: zone, parts: batch) }
            for reference in group { uploaded.insert(reference.digest) }
        }
    }

    /// Downloads the external values change `seq` (its encoded change set,
    /// `payload`) refers to that the store lacks, checking each against its
    /// digest. A payload that does not decode is left to the apply, which
    /// sets it aside.
    func downloadExternalValues(of payload: [UInt8], seq: Int64) async throws(SyncError) {
        guard SyncChangeSet.mentionsExternal(payload),
            let references = try? SyncReplica.externalReferences(in: payload)
        else { return }
        try await download(references, for: "change \(seq)")
    }

    /// Downloads the external values of the snapshot at `through`.
    func downloadExternalValues(ofSnapshot through: Int64) async throws(SyncError) {
        let references = try store({ try $0.snapshotExternalReferences(through: through) }, "reading the snapshot")
        try await download(references, for: "the snapshot at change \(through)")
    }

    private struct PartKey: Hashable {
        let digest: [UInt8]
        let part: Int
    }

    /// Downloads what `references` lack, in requests of about
    /// ``transferBytes``, each kept in one write; then checks each value
    /// downloaded against its digest.
    private func download(_ references: [ExternalReference], for what: String) async throws(SyncError) {
        guard !references.isEmpty else { return }
        let missing = try store({ try $0.partsToDownload(references) }, "reading the downloaded parts")
        guard !missing.isEmpty else { return }
        // The requests: about `transferBytes` of parts each.
        var requests: [[(reference: ExternalReference, part: Int)]] = [[]]
        var size = 0
        for (reference, parts) in missing {
            for part in parts {
                if size >= Self.transferBytes {
                    requests.append([])
                    size = 0
                }
                requests[requests.count - 1].append((reference, part))
                size += min(ExternalReference.partSize, reference.length - part * ExternalReference.partSize)
            }
        }
        for wanted in requests {
            let found = try await server.parts(zone: zone, wanted.map { ($0.reference.digest, $0.part) })
            var byKey: [PartKey: [UInt8]] = [:]
            for (digest, part, bytes) in found { byKey[PartKey(digest: digest, part: part)] = bytes }
            var kept: [(reference: ExternalReference, part: Int, bytes: [UInt8])] = []
            for (reference, part) in wanted {
                guard let bytes = byKey[PartKey(digest: reference.digest, part: part)] else {
                    throw SyncError(
                        .damagedServerChange,
                        "zone \(zone): \(what) refers to external value \(reference), whose part \(part) the zone lacks")
                }
                kept.append((reference, part, bytes))
            }
            do {
                try replica.with { try $0.keepParts(kept) }
            } catch {
                throw SyncError(.damagedServerChange, "zone \(zone): \(what): \(error); it is downloaded again")
            }
        }
        do {
            try replica.with { try $0.checkDownloaded(missing.map(\.reference)) }
        } catch {
            throw SyncError(.damagedServerChange, "zone \(zone): \(what): \(error); it is downloaded again")
        }
    }
}
