import FidelitySupport
import Foundation
import Strata
import StrataTesting
import XCTest

/// Model inheritance (iOS 26): a fetch of the base returns every class's
/// models with all their attributes, a fetch of a subclass only its own
/// and its subclasses', type checks and casts work in predicates,
/// relationships to the base hold subclasses, and a unique value is
/// unique across the whole hierarchy.
nonisolated final class InheritanceTests: FidelityTestCase {
    private let day: TimeInterval = 86_400
    private var types: [any PersistentModel.Type] {
        [
            Journey.self, BusinessJourney.self, ConferenceJourney.self, PersonalJourney.self, Expense.self, Meeting.self,
            Traveler.self,
        ]
    }

    /// The store of these tests, checked at tear-down.
    private func open() throws -> ModelContainer {
        try container(
            Journey.self, BusinessJourney.self, ConferenceJourney.self, PersonalJourney.self, Expense.self, Meeting.self,
            Traveler.self, name: "journeys.store")
    }

    private func date(_ days: Double) -> Date { Date(timeIntervalSince1970: 1_800_000_000 + days * day) }

    /// Two plain journeys, two business ones (one a conference), two
    /// personal ones, saved.
    private func stocked() throws -> ModelContainer {
        let container = try open()
        let context = ModelContext(container)
        context.insert(Journey(name: "Walk", destination: "Oslo", start: date(5)))
        context.insert(Journey(name: "Drive", destination: "Bergen", start: date(1)))
        context.insert(BusinessJourney(name: "Pitch", destination: "Oslo", start: date(3), perDiem: 90, client: "Acme"))
        context.insert(ConferenceJourney(name: "Summit", destination: "Lisbon", start: date(2), conference: "SwiftConf"))
        let home: Journey = PersonalJourney(name: "Home", destination: "Oslo", start: date(4), reason: .family)
        context.insert(home)
        context.insert(PersonalJourney(name: "Beach", destination: "Faro", start: date(6), reason: .vacation))
        try context.save()
        return container
    }

    func testAFetchOfTheBaseReturnsEveryClassWithAllItsAttributes() throws {
        _ = try stocked()
        let context = ModelContext(try open())
        let all = try context.fetch(FetchDescriptor<Journey>(sortBy: [SortDescriptor(\.start)]))
        XCTAssertEqual(all.map(\.name), ["Drive", "Summit", "Pitch", "Home", "Walk", "Beach"])
        XCTAssertEqual(all.map(\.badge), ["journey", "business", "business", "personal", "journey", "personal"])
        let summit = try XCTUnwrap(all[1] as? ConferenceJourney)
        XCTAssertEqual([summit.conference, summit.destination], ["SwiftConf", "Lisbon"])
        XCTAssertEqual(summit.perDiem, 150)
        let pitch = try XCTUnwrap(all[2] as? BusinessJourney)
        XCTAssertEqual(pitch.client, "Acme")
        XCTAssertFalse(pitch is ConferenceJourney)
        XCTAssertEqual((all[3] as? PersonalJourney)?.reason, .family)
        XCTAssertEqual(all[3].persistentModelID.entityName, "PersonalJourney")
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Journey>()), 6)

        // A fetch of a subclass: its own models and its subclasses'.
        let business = try context.fetch(FetchDescriptor<BusinessJourney>(sortBy: [SortDescriptor(\.name)]))
        XCTAssertEqual(business.map(\.name), ["Pitch", "Summit"])
        XCTAssertTrue(business[0] === pitch, "one model per row, whichever class it was fetched as")
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<BusinessJourney>()), 2)
        XCTAssertEqual(try context.fetch(FetchDescriptor<ConferenceJourney>()).map(\.name), ["Summit"])
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<PersonalJourney>()), 2)
        // A predicate on an inherited attribute, in a fetch of a subclass.
        let oslo = #Predicate<BusinessJourney> { $0.destination == "Oslo" }
        XCTAssertEqual(try context.fetch(FetchDescriptor(predicate: oslo)).map(\.name), ["Pitch"])
        // The identifier names the class; model(for:) finds the model.
        let id = summit.persistentModelID
        XCTAssertEqual(id.entityName, "ConferenceJourney")
        let other = ModelContext(try open())
        XCTAssertEqual((other.model(for: id) as? ConferenceJourney)?.conference, "SwiftConf")
    }

    func testSortingAndPagingRunOverTheWholeHierarchy() throws {
        let context = ModelContext(try stocked())
        var descriptor = FetchDescriptor<Journey>(sortBy: [SortDescriptor(\.start, order: .reverse)])
        descriptor.fetchOffset = 1
        descriptor.fetchLimit = 3
        XCTAssertEqual(try context.fetch(descriptor).map(\.name), ["Walk", "Home", "Pitch"])
        XCTAssertEqual(try context.fetchCount(descriptor), 3)
        XCTAssertEqual(
            try context.fetchIdentifiers(descriptor).map(\.entityName), ["Journey", "PersonalJourney", "BusinessJourney"])
        let byName = FetchDescriptor<Journey>(sortBy: [SortDescriptor(\.destination), SortDescriptor(\.name)])
        XCTAssertEqual(
            try context.fetch(byName).map(\.name), ["Drive", "Beach", "Summit", "Home", "Pitch", "Walk"])
        var seen: [String] = []
        try context.enumerate(byName, batchSize: 4) { seen.append($0.name) }
        XCTAssertEqual(seen, ["Drive", "Beach", "Summit", "Home", "Pitch", "Walk"])
        XCTAssertEqual(try context.fetch(byName, batchSize: 2).map(\.name), seen)
    }

    func testTypeChecksAndCastsWorkInPredicates() throws {
        let context = ModelContext(try stocked())
        let sorted = [SortDescriptor(\Journey.name)]
        let business = #Predicate<Journey> { $0 is BusinessJourney }
        XCTAssertEqual(try context.fetch(FetchDescriptor(predicate: business, sortBy: sorted)).map(\.name), ["Pitch", "Summit"])
        let notBusiness = #Predicate<Journey> { !($0 is BusinessJourney) }
        XCTAssertEqual(
            try context.fetch(FetchDescriptor(predicate: notBusiness, sortBy: sorted)).map(\.name),
            ["Beach", "Drive", "Home", "Walk"])
        XCTAssertEqual(try context.fetchCount(FetchDescriptor(predicate: notBusiness)), 4)
        let generous = #Predicate<Journey> { journey in
            if let trip = journey as? BusinessJourney {
                return trip.perDiem > 100
            } else {
                return false
            }
        }
        XCTAssertEqual(try context.fetch(FetchDescriptor(predicate: generous)).map(\.name), ["Summit"])
        let family = #Predicate<Journey> { ($0 as? PersonalJourney)?.reason.rawValue == "family" }
        XCTAssertEqual(try context.fetch(FetchDescriptor(predicate: family)).map(\.name), ["Home"])
        // With a condition on an indexed attribute: each class's rows are
        // read through its index, and a class the type check rules out
        // reads none.
        let osloBusiness = #Predicate<Journey> { $0 is BusinessJourney && $0.destination == "Oslo" }
        XCTAssertEqual(try context.fetch(FetchDescriptor(predicate: osloBusiness)).map(\.name), ["Pitch"])
        let plan = try context.explain(FetchDescriptor(predicate: osloBusiness))
        XCTAssertTrue(plan.contains("PersonalJourney: rows"), plan)
        XCTAssertTrue(plan.contains("BusinessJourney: scan BusinessJourney\nfilter: $0.destination"), plan)
        // Unsaved models are tested too, each once.
        context.insert(BusinessJourney(name: "Audit", destination: "Oslo", start: date(9), perDiem: 200))
        XCTAssertEqual(
            try context.fetch(FetchDescriptor(predicate: osloBusiness, sortBy: sorted)).map(\.name), ["Audit", "Pitch"])
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Journey>()), 7)
    }

    func testRelationshipsToTheBaseHoldSubclasses() throws {
        do {
            let context = ModelContext(try stocked())
            let ada = Traveler(name: "Ada")
            context.insert(ada)
            let all = try context.fetch(FetchDescriptor<Journey>(sortBy: [SortDescriptor(\.name)]))
            for journey in all where journey.name != "Drive" { journey.traveler = ada }
            let pitch = try XCTUnwrap(all.first { $0.name == "Pitch" } as? BusinessJourney)
            pitch.expenses.append(Expense(amount: 12))
            pitch.meetings.append(Meeting(topic: "Kickoff"))
            let summit = try XCTUnwrap(all.first { $0.name == "Summit" })
            let taxi = Expense(amount: 30)
            context.insert(taxi)
            taxi.journey = summit
            XCTAssertEqual(ada.journeys.count, 5)
            try context.save()
        }
        let context = ModelContext(try open())
        let ada = try XCTUnwrap(context.fetch(FetchDescriptor<Traveler>()).first)
        XCTAssertEqual(
            Set(ada.journeys.map { "\(type(of: $0))" }), ["Journey", "BusinessJourney", "ConferenceJourney", "PersonalJourney"])
        XCTAssertEqual(ada.journeys.count, 5)
        let taxi = try XCTUnwrap(context.fetch(FetchDescriptor<Expense>(predicate: #Predicate { $0.amount == 30 })).first)
        XCTAssertTrue(taxi.journey is ConferenceJourney)
        XCTAssertEqual(taxi.journey?.expenses.map(\.amount), [30])
        let pitch = try XCTUnwrap(
            context.fetch(FetchDescriptor<BusinessJourney>(predicate: #Predicate { $0.name == "Pitch" })).first)
        XCTAssertEqual(pitch.meetings.map(\.topic), ["Kickoff"])
        XCTAssertEqual(pitch.meetings.first?.journey, pitch)
        // A predicate through a relationship to the base reads the
        // subclass's row.
        let conferenceExpenses = #Predicate<Expense> { $0.journey?.destination == "Lisbon" }
        XCTAssertEqual(try context.fetch(FetchDescriptor(predicate: conferenceExpenses)).map(\.amount), [30])
        // Cascades run over the subclass's inherited and own relationships.
        context.delete(pitch)
        try context.save()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Meeting>()), 0)
        XCTAssertEqual(try context.fetch(FetchDescriptor<Expense>()).map(\.amount), [30])
        XCTAssertEqual(ada.journeys.count, 4)
        let fresh = ModelContext(try open())
        XCTAssertEqual(try fresh.fetch(FetchDescriptor<Traveler>()).first?.journeys.count, 4)
    }

    func testAUniqueValueIsUniqueAcrossTheHierarchy() throws {
        let container = try stocked()
        let context = ModelContext(container)
        context.insert(PersonalJourney(name: "Pitch", destination: "Rome", start: date(8), reason: .other))
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .uniqueConstraintViolation, "\(error)")
            XCTAssertTrue("\(error)".contains("BusinessJourney"), "\(error)")
        }
        XCTAssertTrue(context.hasChanges, "a failed save keeps the context's changes")
        context.rollback()
        // A rename into a value another class holds is refused too.
        let home = try XCTUnwrap(
            context.fetch(FetchDescriptor<PersonalJourney>(predicate: #Predicate { $0.name == "Home" })).first)
        home.name = "Walk"
        XCTAssertThrowsError(try context.save())
        context.rollback()
        // The same class upserts, as SwiftData does.
        context.insert(BusinessJourney(name: "Pitch", destination: "Rome", start: date(8), perDiem: 10))
        try context.save()
        let fresh = ModelContext(try open())
        let pitches = try fresh.fetch(FetchDescriptor<Journey>(predicate: #Predicate { $0.name == "Pitch" }))
        XCTAssertEqual(pitches.map(\.destination), ["Rome"])
        XCTAssertEqual(try fresh.fetchCount(FetchDescriptor<Journey>()), 6)
    }

    func testDeleteWhereHonoursIncludeSubclasses() throws {
        let container = try stocked()
        let context = ModelContext(container)
        try context.delete(model: Journey.self, where: #Predicate { $0.destination == "Oslo" }, includeSubclasses: false)
        try context.save()
        XCTAssertEqual(
            try context.fetch(FetchDescriptor<Journey>(sortBy: [SortDescriptor(\.name)])).map(\.name),
            ["Beach", "Drive", "Home", "Pitch", "Summit"])
        try context.delete(model: Journey.self, where: #Predicate { $0.destination == "Oslo" })
        try context.save()
        XCTAssertEqual(
            try context.fetch(FetchDescriptor<Journey>(sortBy: [SortDescriptor(\.name)])).map(\.name),
            ["Beach", "Drive", "Summit"])
        try context.delete(model: BusinessJourney.self)
        try context.save()
        XCTAssertEqual(try ModelContext(try open()).fetch(FetchDescriptor<Journey>()).map(\.name).sorted(), ["Beach", "Drive"])
    }

    func testTheSchemaDescribesTheHierarchy() throws {
        let schema = Schema(types)
        let journey = try XCTUnwrap(schema.entity(named: "Journey"))
        let business = try XCTUnwrap(schema.entity(named: "BusinessJourney"))
        let conference = try XCTUnwrap(schema.entity(named: "ConferenceJourney"))
        XCTAssertNil(journey.superentity)
        XCTAssertEqual(business.superentity?.name, "Journey")
        XCTAssertEqual(conference.superentityName, "BusinessJourney")
        XCTAssertEqual(Set(journey.subentities.map(\.name)), ["BusinessJourney", "PersonalJourney"])
        XCTAssertEqual(business.subentities.map(\.name), ["ConferenceJourney"])
        XCTAssertEqual(business.inheritedProperties.map(\.name), journey.properties.map(\.name))
        XCTAssertEqual(conference.inheritedPropertiesByName.keys.sorted(), business.properties.map(\.name).sorted())
        XCTAssertEqual(Array(conference.properties.map(\.name).suffix(1)), ["conference"])
        XCTAssertEqual(business.uniquenessConstraints, [["name"]], "the base's unique constraint applies to the subclass")
        // Listing a subclass brings its superclasses.
        XCTAssertNotNil(Schema([ConferenceJourney.self]).entity(named: "Journey"))
    }

    func testASubclassThatMakesAnInheritedAttributeUniqueIsRefused() throws {
        XCTAssertThrowsError(try container(Gauge.self, StrictGauge.self)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("StrictGauge") && text.contains("Gauge") && text.contains("label"), text)
        }
    }

    func testAnotherContextsSaveRefreshesASubclassModelsRelationships() throws {
        let container = try stocked()
        let here = ModelContext(container)
        let pitch = try XCTUnwrap(
            here.fetch(FetchDescriptor<BusinessJourney>(predicate: #Predicate { $0.name == "Pitch" })).first)
        pitch.expenses.append(Expense(amount: 5))
        pitch.expenses.append(Expense(amount: 7))
        try here.save()
        XCTAssertEqual(pitch.expenses.map(\.amount).sorted(), [5, 7])

        // Another context deletes them by predicate, without loading
        // them or the journey: the model here loses them once it merges.
        let there = ModelContext(container)
        try there.delete(model: Expense.self, where: #Predicate { $0.amount > 1 })
        try there.save()
        XCTAssertEqual(try here.fetchCount(FetchDescriptor<Expense>()), 0)
        XCTAssertEqual(pitch.expenses.map(\.amount), [])
    }
}
