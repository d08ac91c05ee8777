import Foundation
import StrataTesting
import XCTest

@testable import Strata

/// Record decoding under damage: valid records of every attribute type and
/// of related models are mutated at random (bit flips, truncation, inserted
/// and overwritten bytes, spliced fields) and read back through `fetch`.
/// Each read must either succeed or throw `corruptRecord`; a trap fails
/// the whole test run. Seed printed; replay with `STRATA_SEED`.
final class RecordDamageTests: XCTestCase {
    func testDamagedRecordsReadOrThrowCorruptRecord() throws {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "RecordDamageTests"))
        let rounds = Int(environmentValue("STRATA_DAMAGE_ROUNDS") ?? "") ?? 3_000
        let container = try ModelContainer(
            for: Everything.self, Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        do {
            let context = ModelContext(container)
            for seed in 0..<6 { context.insert(Everything(seed: seed)) }
            let trip = Trip(name: "Lisbon", destination: "Portugal")
            trip.bucketList = [BucketListItem(title: "Tram 28", details: "", hasReservation: false, isInPlan: true)]
            trip.livingAccommodation = LivingAccommodation(address: "Rua 1", placeName: "Casa")
            context.insert(trip)
            try context.save()
        }
        let database = container.store.database
        let entities = ["Everything", "Trip", "BucketListItem"]
        var originals: [(tree: String, key: [UInt8], value: [UInt8])] = []
        try database.read { tx in
            for entity in entities {
                let tree = try XCTUnwrap(tx.treeIfPresent(Store.treeName(entityName: entity)))
                for (key, value) in try tx.scan(tree) { originals.append((Store.treeName(entityName: entity), key, value)) }
            }
        }

        var outcomes = (read: 0, corrupt: 0)
        for _ in 0..<rounds {
            let target = originals[Int.random(in: 0..<originals.count, using: &random)]
            let donor = originals[Int.random(in: 0..<originals.count, using: &random)].value
            let damaged = Self.damage(target.value, donor: donor, using: &random)
            try database.write { tx in try tx.put(target.key, damaged, in: tx.tree(target.tree)) }
            do {
                try readEverything(in: ModelContext(container))
                outcomes.read += 1
            } catch let error as SwiftDataError where error.code == .corruptRecord {
                outcomes.corrupt += 1
            }
            try database.write { tx in try tx.put(target.key, target.value, in: tx.tree(target.tree)) }
        }
        print("RecordDamageTests: \(rounds) damaged records, \(outcomes.read) still read, \(outcomes.corrupt) corruptRecord")
        XCTAssertGreaterThan(outcomes.corrupt, rounds / 10, "most damage should be detected")
        // The originals are back: everything reads again.
        try readEverything(in: ModelContext(container))
    }

    /// Fetches every model and touches every property, relationships too.
    private func readEverything(in context: ModelContext) throws {
        for model in try context.fetch(FetchDescriptor<Everything>()) {
            _ = (model.string, model.decimal, model.url, model.uuid, model.shape, model.address, model.scores)
            _ = (model.matrix, model.addresses, model.optionalAddress, model.optionalTags, model.status, model.priority)
        }
        for trip in try context.fetch(FetchDescriptor<Trip>()) {
            _ = (trip.name, trip.startDate, trip.bucketList.map(\.title), trip.livingAccommodation?.placeName)
        }
        for item in try context.fetch(FetchDescriptor<BucketListItem>()) { _ = (item.title, item.trip?.name) }
    }

    static func damage(_ bytes: [UInt8], donor: [UInt8], using random: inout SeededRandom) -> [UInt8] {
        var out = bytes
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            let position = out.isEmpty ? 0 : Int.random(in: 0..<out.count, using: &random)
            switch Int.random(in: 0..<6, using: &random) {
            case 0 where !out.isEmpty:
                out[position] ^= 1 << UInt8.random(in: 0..<8, using: &random)
            case 1:
                out.removeSubrange(Int.random(in: 0...out.count, using: &random)...)
            case 2:
                out.insert(UInt8.random(in: 0...255, using: &random), at: Int.random(in: 0...out.count, using: &random))
            case 3 where !out.isEmpty:
                out[position] = [0x00, 0x7F, 0x80, 0xFF][Int.random(in: 0..<4, using: &random)]
            case 4 where !donor.isEmpty:
                // Splice a run of another record (valid fields, wrong place).
                let start = Int.random(in: 0..<donor.count, using: &random)
                let run = donor[start..<min(donor.count, start + Int.random(in: 1...24, using: &random))]
                out.replaceSubrange(position..<min(out.count, position + run.count), with: run)
            default:
                // A long varint or length: 0xFF runs.
                out.insert(contentsOf: repeatElement(0xFF, count: Int.random(in: 1...11, using: &random)), at: position)
            }
        }
        return out
    }
}
