#if Sync
    import Foundation
    import Strata
    import StrataEngine
    @testable import StrataSync
    import StrataTesting
    import XCTest

    @Model
    final class Photo {
        var name: String
        @Attribute(.externalStorage) var image: Data?
        @Attribute(.externalStorage) var thumbnail: Data = Data()

        init(name: String, image: Data?, thumbnail: Data = Data()) {
            self.name = name
            self.image = image
            self.thumbnail = thumbnail
        }
    }

    /// A model with a unique constraint (so its store keeps a zone copy)
    /// and a required `.externalStorage` value with no default.
    @Model
    final class Badge {
        @Attribute(.unique) var name: String
        @Attribute(.externalStorage) var image: Data
        var note: String

        init(name: String, image: Data, note: String) {
            self.name = name
            self.image = image
            self.note = note
        }
    }

    /// An album before its shots had images.
    enum AlbumV1: VersionedSchema {
        static let versionIdentifier = Schema.Version(1, 0, 0)
        static var models: [any PersistentModel.Type] { [Shot.self] }

        @Model
        final class Shot {
            var name: String
            init(name: String) { self.name = name }
        }
    }

    /// The album with an image per shot, kept outside the record.
    enum AlbumV2: VersionedSchema {
        static let versionIdentifier = Schema.Version(2, 0, 0)
        static var models: [any PersistentModel.Type] { [Shot.self] }

        @Model
        final class Shot {
            var name: String
            @Attribute(.externalStorage) var image: Data?
            init(name: String, image: Data?) {
                self.name = name
                self.image = image
            }
        }
    }

    /// `.externalStorage` values through sync: in parts on the server, each
    /// value once per zone, checked against its digest when downloaded,
    /// and uploads and downloads that resume where they stopped.
    final class SyncExternalTests: SyncTestCase {
        override class var models: [any PersistentModel.Type] { [Photo.self] }

        /// `count` bytes that do not compress, different for each `seed`.
        func bytes(_ count: Int, seed: UInt64) -> Data {
            var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
            var out = [UInt8](repeating: 0, count: count)
            for index in out.indices {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                out[index] = UInt8(truncatingIfNeeded: state)
            }
            return Data(out)
        }

        func photos(_ container: ModelContainer) throws -> [String: (image: Data?, thumbnail: Data)] {
            var result: [String: (image: Data?, thumbnail: Data)] = [:]
            for photo in try ModelContext(container).fetch(FetchDescriptor<Photo>()) {
                result[photo.name] = (photo.image, photo.thumbnail)
            }
            return result
        }

        func number(_ sql: String) throws -> Int {
            Int(try server().psql(sql).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }

        /// Whether the store holds none of sync's copies of external values.
        func holdsNoCopies(_ container: ModelContainer) throws -> Bool {
            try container.store.read { tx in
                try tx.treeIfPresent("sync.blobsOut") == nil && tx.treeIfPresent("sync.blobsIn") == nil
            }
        }

        /// The zone copy holds no `.externalStorage` values, and a model
        /// whose required one has no default goes there all the same; an
        /// alignment leaves this store's values as they are.
        func testARequiredExternalValueOfAModelWithAUniqueConstraintSurvivesTheZoneCopy() async throws {
            let zone = "zone-\(UUID())"
            let schema = Schema([Badge.self])
            let (a, syncA) = try device("a-badge", zone: zone, schema: schema)
            let (b, syncB) = try device("b-badge", zone: zone, schema: schema)
            let image = Data((0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            let onA = ModelContext(a)
            onA.insert(Badge(name: "gold", image: image, note: "a"))
            try onA.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
            // B's save waits while A's arrives: B's round ends aligned.
            let onB = ModelContext(b)
            try XCTUnwrap(onB.fetch(FetchDescriptor<Badge>()).first).note = "b"
            try onB.save()
            try XCTUnwrap(onA.fetch(FetchDescriptor<Badge>()).first).note = "a2"
            try onA.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
            try await syncA.syncNow()
            for container in [a, b] {
                let badges = try ModelContext(container).fetch(FetchDescriptor<Badge>())
                XCTAssertEqual(badges.map(\.note), ["b"])
                XCTAssertEqual(badges.map(\.image), [image])
            }
            XCTAssertEqual(syncB.status.pendingChanges, 0)
            // B's copy kept up with the zone: in step, with the badge.
            var configuration = ModelConfiguration(
                schema: schema, url: URL(fileURLWithPath: directory.file("b-badge.store") + "-zone"))
            configuration.recordsHistory = false
            let copy = try ModelContainer(for: schema, configurations: configuration)
            XCTAssertEqual(
                try SyncReplica(container: copy, isZoneCopy: true).state().position,
                try SyncReplica(container: b).state().position)
            XCTAssertEqual(try ModelContext(copy).fetch(FetchDescriptor<Badge>()).map(\.note), ["b"])
        }

        /// An empty value (not nil) has no parts: a device that downloaded
        /// nothing else applies it all the same.
        func testAnEmptyExternalValueSyncs() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a-empty", zone: zone)
            let (b, syncB) = try device("b-empty", zone: zone)
            let onA = ModelContext(a)
            onA.insert(Photo(name: "blank", image: Data()))
            try onA.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
            let photos = try ModelContext(b).fetch(FetchDescriptor<Photo>())
            XCTAssertEqual(photos.map(\.name), ["blank"])
            XCTAssertEqual(photos.map(\.image), [Data()])
        }

        func testExternalValuesSyncInPartsOncePerZone() async throws {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let big = bytes(2 * ExternalReference.partSize + 1000, seed: 1)
            let context = ModelContext(a)
            context.insert(Photo(name: "big", image: big, thumbnail: bytes(100, seed: 2)))
            context.insert(Photo(name: "copy", image: big, thumbnail: bytes(100, seed: 3)))
            context.insert(Photo(name: "none", image: nil))
            try context.save()
            try await syncA.syncNow()

            // Three parts of the shared image and one of each thumbnail
            // (an empty value has none): each value once.
            XCTAssertEqual(try number("SELECT count(*) FROM strata_sync.parts WHERE zone = '\(zone)'"), 5)
            XCTAssertEqual(
                try number("SELECT count(DISTINCT digest) FROM strata_sync.parts WHERE zone = '\(zone)'"), 3)
            XCTAssertLessThan(
                try number("SELECT max(length(payload)) FROM strata_sync.changes WHERE zone = '\(zone)'"), 4096,
                "changes carry references, not the values")
            XCTAssertTrue(try holdsNoCopies(a), "the copies kept to upload go once the outbox is empty")

            try await syncB.syncNow()
            var seen = try photos(b)
            XCTAssertEqual(seen["big"]?.image, big)
            XCTAssertEqual(seen["copy"]?.image, big)
            XCTAssertEqual(seen["big"]?.thumbnail, bytes(100, seed: 2))
            XCTAssertEqual(seen["copy"]?.thumbnail, bytes(100, seed: 3))
            XCTAssertEqual(seen["none"].map { $0.image == nil }, true)
            XCTAssertEqual(seen["none"]?.thumbnail, Data())
            XCTAssertTrue(try holdsNoCopies(b), "downloaded parts go once applied")

            // Updates both ways: a value replaced, one set to nil.
            let contextB = ModelContext(b)
            let copy = try XCTUnwrap(
                try contextB.fetch(FetchDescriptor<Photo>(predicate: #Predicate { $0.name == "copy" })).first)
            copy.image = nil
            copy.thumbnail = bytes(5000, seed: 4)
            try contextB.save()
            try await syncB.syncNow()
            let replaced = bytes(ExternalReference.partSize / 2, seed: 5)
            let photo = try XCTUnwrap(try context.fetch(FetchDescriptor<Photo>(predicate: #Predicate { $0.name == "big" })).first)
            photo.image = replaced
            try context.save()
            try await syncA.syncNow()
            try await syncB.syncNow()
            for container in [a, b] {
                seen = try photos(container)
                XCTAssertEqual(seen["big"]?.image, replaced)
                XCTAssertEqual(seen["copy"].map { $0.image == nil }, true)
                XCTAssertEqual(seen["copy"]?.thumbnail, bytes(5000, seed: 4))
            }

            // A device that joins after a trim gets the values from the
            // snapshot.
            _ = try await syncA.trimServerHistory()
            let (c, syncC) = try device("c", zone: zone)
            try await syncC.syncNow()
            seen = try photos(c)
            XCTAssertEqual(seen["big"]?.image, replaced)
            XCTAssertEqual(seen["copy"]?.thumbnail, bytes(5000, seed: 4))
            XCTAssertEqual(seen["none"].map { $0.image == nil }, true)
        }

        /// A new zone where A pushed a photo whose image takes two parts
        /// (the second of 10 bytes), and B, which has not synced yet.
        func twoPartImagePushed(seed: UInt64) async throws -> (
            zone: String, image: Data, b: ModelContainer, syncB: SyncEngine
        ) {
            let zone = "zone-\(UUID())"
            let (a, syncA) = try device("a", zone: zone)
            let (b, syncB) = try device("b", zone: zone)
            let image = bytes(ExternalReference.partSize + 10, seed: seed)
            let context = ModelContext(a)
            context.insert(Photo(name: "one", image: image))
            try context.save()
            try await syncA.syncNow()
            return (zone, image, b, syncB)
        }

        /// A part damaged on the server fails the change's apply with a
        /// typed error; nothing is stored, the position stays, and the next
        /// round downloads the value again.
        func testADamagedPartFailsTheApplyAndIsDownloadedAgain() async throws {
            let (zone, image, b, syncB) = try await twoPartImagePushed(seed: 7)

            let flip = """
                UPDATE strata_sync.parts SET payload = set_byte(payload, 5, get_byte(payload, 5) # 255)
                WHERE zone = '\(zone)' AND part = 1
                """
            try server().psql(flip)
            do {
                try await syncB.syncNow()
                XCTFail("a damaged part is not applied")
            } catch {
                XCTAssertEqual(error.code, .damagedServerChange, "\(error)")
                XCTAssertTrue("\(error)".contains("digest"), "\(error)")
            }
            XCTAssertEqual(try photos(b).count, 0)
            XCTAssertEqual(syncB.status.serverPosition, 0)
            let reference = ExternalReference(of: image)
            let replica = try SyncReplica(container: b)
            XCTAssertEqual(try replica.partsToDownload(reference), [0, 1], "the damaged value's parts are not kept")

            try server().psql(flip)
            try await syncB.syncNow()
            XCTAssertEqual(try photos(b)["one"]?.image, image)
        }

        /// A part of the wrong length, or one the zone lacks, fails the
        /// change's apply with a typed error naming the part: nothing is
        /// stored or kept, the position stays, and once the server holds
        /// the part again the next round applies the change.
        func testAPartOfTheWrongLengthOrMissingFailsTheApply() async throws {
            let (zone, image, b, syncB) = try await twoPartImagePushed(seed: 8)
            let reference = ExternalReference(of: image)
            let part = "zone = '\(zone)' AND part = 1"
            let saved = "saved_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased())"
            try server().psql("CREATE TABLE \(saved) AS SELECT * FROM strata_sync.parts WHERE \(part)")

            for (damage, says) in [
                (
                    "UPDATE strata_sync.parts SET payload = substring(payload FROM 1 FOR 9) WHERE \(part)",
                    "part 1 has 9 bytes, not 10"
                ),
                ("DELETE FROM strata_sync.parts WHERE \(part)", "whose part 1 the zone lacks"),
            ] {
                try server().psql(damage)
                do {
                    try await syncB.syncNow()
                    XCTFail("a change whose part is damaged is not applied (\(says))")
                } catch {
                    XCTAssertEqual(error.code, .damagedServerChange, "\(error)")
                    XCTAssertTrue("\(error)".contains(says), "\(error)")
                }
                XCTAssertEqual(try photos(b).count, 0)
                XCTAssertEqual(syncB.status.serverPosition, 0)
                XCTAssertEqual(try SyncReplica(container: b).partsToDownload(reference), [0, 1], "nothing is kept")
                try server().psql(
                    "DELETE FROM strata_sync.parts WHERE \(part); INSERT INTO strata_sync.parts SELECT * FROM \(saved)")
            }
            try server().psql("DROP TABLE \(saved)")
            try await syncB.syncNow()
            XCTAssertEqual(try photos(b)["one"]?.image, image)
        }

        /// An older device keeps the image its schema lacks, and has it once
        /// it migrates, with no server at hand: the parts of kept changes
        /// stay until they are applied.
        func testAnImageAnOlderSchemaLacksArrivesWithItsMigration() async throws {
            let zone = "zone-\(UUID())"
            let image = bytes(ExternalReference.partSize + 77, seed: 11)
            let (new, syncNew) = try device("new", zone: zone, schema: Schema(versionedSchema: AlbumV2.self))
            let context = ModelContext(new)
            context.insert(AlbumV2.Shot(name: "beach", image: image))
            try context.save()
            try await syncNew.syncNow()
            try await olderDevicePulls(zone: zone)

            let (upgraded, syncUpgraded) = try device("old", zone: zone, schema: Schema(versionedSchema: AlbumV2.self))
            let shots = try ModelContext(upgraded).fetch(FetchDescriptor<AlbumV2.Shot>())
            XCTAssertEqual(shots.map(\.name), ["beach"])
            XCTAssertEqual(shots.first?.image, image)
            try await syncUpgraded.syncNow()
            XCTAssertTrue(try holdsNoCopies(upgraded))
        }

        /// A device of ``AlbumV1`` pulls `zone`, then closes its store.
        private func olderDevicePulls(zone: String) async throws {
            let (old, syncOld) = try device("old", zone: zone, schema: Schema(versionedSchema: AlbumV1.self))
            try await syncOld.syncNow()
            XCTAssertEqual(syncOld.status.setAside, [])
            XCTAssertEqual(try ModelContext(old).fetch(FetchDescriptor<AlbumV1.Shot>()).map(\.name), ["beach"])
            await syncOld.stop()
            engines.removeAll { $0 === syncOld }
        }

        /// A device whose server cuts its second request of parts.
        func cutDevice(_ name: String, zone: String) throws -> (ModelContainer, SyncEngine, CuttingParts) {
            let url = URL(fileURLWithPath: directory.file(name + ".store"))
            let container = track(try ModelContainer(for: Photo.self, configurations: ModelConfiguration(url: url)))
            let server = CuttingParts(PostgresZoneServer(configuration: try configuration(zone: zone)))
            let sync = try SyncEngine(container: container, configuration: try configuration(zone: zone), server: server)
            engines.append(sync)
            return (container, sync, server)
        }

        /// Uploads and downloads cut in the middle resume at the parts
        /// they lack: no part goes twice.
        func testUploadsAndDownloadsResumeWhereTheyStopped() async throws {
            let zone = "zone-\(UUID())"
            let partsPerValue = 2 * Worker.transferBytes / ExternalReference.partSize + 1
            let image = bytes(partsPerValue * ExternalReference.partSize - 3, seed: 9)
            let (a, syncA, cutA) = try cutDevice("a", zone: zone)
            let context = ModelContext(a)
            context.insert(Photo(name: "large", image: image))
            try context.save()
            do {
                try await syncA.syncNow()
                XCTFail("the upload was cut")
            } catch {
                XCTAssertEqual(error.code, .unreachable, "\(error)")
            }
            XCTAssertEqual(try head(zone), 0, "no change goes before its values")
            try await syncA.syncNow()
            XCTAssertEqual(cutA.counts.put, partsPerValue, "each part uploaded once")

            let (b, syncB, cutB) = try cutDevice("b", zone: zone)
            do {
                try await syncB.syncNow()
                XCTFail("the download was cut")
            } catch {
                XCTAssertEqual(error.code, .unreachable, "\(error)")
            }
            XCTAssertEqual(try photos(b).count, 0)
            try await syncB.syncNow()
            XCTAssertEqual(try photos(b)["large"]?.image, image)
            XCTAssertEqual(cutB.counts.got, partsPerValue, "each part downloaded once")
        }
    }

    /// A server whose second request of parts (an upload or a download)
    /// breaks once, after the first went through; it counts the parts
    /// moved.
    final class CuttingParts: ForwardingServer, @unchecked Sendable {
        // Guarded by `lock`.
        private var requests = 0
        private var moved = (put: 0, got: 0)
        private let lock = NSLock()

        var counts: (put: Int, got: Int) { lock.withLock { moved } }

        private func breaks() -> Bool {
            lock.withLock {
                requests += 1
                return requests == 2
            }
        }

        override func putParts(zone: String, parts: [(digest: [UInt8], part: Int, bytes: [UInt8])])
            async throws(SyncError)
        {
            if breaks() { throw SyncError(.unreachable, "the connection broke") }
            try await base.putParts(zone: zone, parts: parts)
            lock.withLock { moved.put += parts.count }
        }

        override func parts(zone: String, _ wanted: [(digest: [UInt8], part: Int)]) async throws(SyncError)
            -> [(digest: [UInt8], part: Int, bytes: [UInt8])]
        {
            if breaks() { throw SyncError(.unreachable, "the connection broke") }
            let found = try await base.parts(zone: zone, wanted)
            lock.withLock { moved.got += found.count }
            return found
        }
    }
#endif
