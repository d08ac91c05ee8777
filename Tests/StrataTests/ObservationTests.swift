import Foundation
import StrataTesting
import XCTest

@testable import Strata

/// Models are Observable; a model makes its registrar only for a tracking.
final class ObservationTests: StoreTestCase {
    /// A getter reports its read to Observation through a registrar made
    /// only when a tracking is recording (``_ObservationProbe``): a fetched
    /// model read outside one gets none, and one read inside a tracking —
    /// on this thread or another — is observed as before.
    func testAModelMakesItsRegistrarOnlyWhenATrackingReadsIt() throws {
        XCTAssertTrue(
            _ObservationProbe.isReliable,
            "Observation no longer hashes the key paths a tracking records: every getter now makes a registrar")
        let container = try track(
            ModelContainer(
                for: Trip.self, configurations: ModelConfiguration(url: storeURL())))
        let writer = ModelContext(container)
        writer.insert(Trip(name: "A", destination: "X"))
        writer.insert(Trip(name: "B", destination: "X"))
        try writer.save()
        let trips = try ModelContext(container).fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)]))
        _ = trips.map(\.destination)
        XCTAssertNil(trips[0]._strataState.registrarBox, "a read outside a tracking makes no registrar")

        let fired = LockedFlag()
        withObservationTracking {
            _ = trips[0].destination
        } onChange: {
            fired.set()
        }
        XCTAssertNotNil(trips[0]._strataState.registrarBox)
        trips[0].name = "not observed"
        XCTAssertFalse(fired.value)
        trips[0].destination = "Y"
        XCTAssertTrue(fired.value)

        // A tracking on another thread.
        let firedElsewhere = LockedFlag()
        // The model is handed over for the tracking only (models are not
        // Sendable; this one is not touched here meanwhile).
        nonisolated(unsafe) let other = trips[1]
        let done = DispatchSemaphore(value: 0)
        Thread {
            withObservationTracking {
                _ = other.destination
            } onChange: {
                firedElsewhere.set()
            }
            done.signal()
        }.start()
        done.wait()
        other.destination = "Z"
        XCTAssertTrue(firedElsewhere.value)
    }

}
