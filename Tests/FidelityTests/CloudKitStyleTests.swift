import FidelitySupport
import Foundation
import Strata
import XCTest

nonisolated final class CloudKitStyleTests: FidelityTestCase {
    func testOptionalToManyOnBothSidesOfAManyToMany() throws {
        do {
            let context = ModelContext(try container(Note.self))
            let work = Tag(name: "work")
            let home = Tag(name: "home")
            let plan = Note(title: "plan", body: "write it down")
            let list = Note(title: "list")
            context.insert(plan)
            context.insert(list)
            plan.tags = [work, home]
            list.tags?.append(home)
            XCTAssertEqual(work.notes?.map(\.title), ["plan"], "the inverse is set before the save")
            XCTAssertEqual(Set(home.notes?.map(\.title) ?? []), ["plan", "list"])
            try context.save()
        }
        let context = ModelContext(try container(Note.self))
        let tags = try context.fetch(FetchDescriptor<Tag>(sortBy: [SortDescriptor(\.name)]))
        XCTAssertEqual(tags.map(\.name), ["home", "work"])
        XCTAssertEqual(Set(tags[0].notes?.map(\.title) ?? []), ["plan", "list"])
        XCTAssertEqual(tags[1].notes?.map(\.title), ["plan"])
        let plan = try XCTUnwrap(try context.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.title == "plan" })).first)
        XCTAssertEqual(Set(plan.tags?.map(\.name) ?? []), ["home", "work"])

        // Removing through the optional list updates the other side.
        plan.tags?.removeAll { $0.name == "work" }
        try context.save()
        XCTAssertEqual(tags[1].notes?.count, 0)
        let again = ModelContext(try container(Note.self))
        let work = try XCTUnwrap(try again.fetch(FetchDescriptor<Tag>(predicate: #Predicate { $0.name == "work" })).first)
        XCTAssertEqual(work.notes?.count, 0)

        // Setting the list to nil empties it.
        plan.tags = nil
        try context.save()
        let last = ModelContext(try container(Note.self))
        let home = try XCTUnwrap(try last.fetch(FetchDescriptor<Tag>(predicate: #Predicate { $0.name == "home" })).first)
        XCTAssertEqual(home.notes?.map(\.title), ["list"])
    }

    func testImplicitlyUnwrappedToManyWithCascade() throws {
        do {
            let context = ModelContext(try container(Folder.self))
            let inbox = Folder(name: "inbox")
            context.insert(inbox)
            inbox.notes.append(Note(title: "a"))
            inbox.notes.append(Note(title: "b"))
            XCTAssertEqual(inbox.notes.first?.folder?.name, "inbox")
            try context.save()
        }
        let context = ModelContext(try container(Folder.self))
        let inbox = try XCTUnwrap(try context.fetch(FetchDescriptor<Folder>()).first)
        XCTAssertEqual(inbox.notes.map(\.title).sorted(), ["a", "b"])
        XCTAssertEqual(
            try context.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.folder?.name == "inbox" })).count, 2)
        context.delete(inbox)
        try context.save()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Note>()), 0)
    }
}
