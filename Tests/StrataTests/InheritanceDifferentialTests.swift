import Foundation
import StrataTesting
import XCTest

@testable import Strata

/// The same random inserts, changes and deletes applied to a hierarchy
/// (Animal, Dog, Puppy, Cat) and to one flat entity with a kind column:
/// after each save, fetches of every class, type checks, casts, sorting,
/// paging and counts give the same models.
final class InheritanceDifferentialTests: StoreTestCase {
    /// The classes a fetch of each kind returns.
    private let below: [String: Set<String>] = [
        "Animal": ["Animal", "Dog", "Puppy", "Cat"], "Dog": ["Dog", "Puppy"], "Puppy": ["Puppy"], "Cat": ["Cat"],
    ]

    private func describe(_ animal: Animal) -> String {
        var text = "\(type(of: animal)) \(animal.name) \(animal.age)"
        if let dog = animal as? Dog { text += " \(dog.breed) \(dog.good)" }
        if let puppy = animal as? Puppy { text += " \(puppy.teeth)" }
        if let cat = animal as? Cat { text += " \(cat.lives)" }
        return text
    }

    private func describe(_ flat: FlatAnimal) -> String {
        var text = "\(flat.kind) \(flat.name) \(flat.age)"
        if let breed = flat.breed, let good = flat.good { text += " \(breed) \(good)" }
        if let teeth = flat.teeth { text += " \(teeth)" }
        if let lives = flat.lives { text += " \(lives)" }
        return text
    }

    func testAHierarchyAnswersAsTheSameDataFlat() throws {
        let seed = SeededRandom.seed(fromEnvironment: "STRATA_INHERITANCE_SEED", label: "inheritance differential")
        var random = SeededRandom(seed: seed)
        let tree = ModelContext(try container(for: [Animal.self, Dog.self, Puppy.self, Cat.self], name: "tree.store"))
        let flat = ModelContext(try container(for: [FlatAnimal.self], name: "flat.store"))
        var next = 0
        for round in 0..<30 {
            for _ in 0..<Int.random(in: 1...12, using: &random) {
                let animals = try tree.fetch(FetchDescriptor<Animal>())
                let roll = animals.isEmpty ? 0 : Int.random(in: 0..<10, using: &random)
                switch roll {
                case 0..<5:
                    next += 1
                    let name = "a\(next)"
                    let age = Int.random(in: 0...15, using: &random)
                    let record = FlatAnimal(name: name, kind: "", age: age)
                    let animal: Animal
                    switch Int.random(in: 0..<4, using: &random) {
                    case 0:
                        animal = Animal(name: name, age: age)
                        record.kind = "Animal"
                    case 1:
                        let breed = ["collie", "pug", "lab"][Int.random(in: 0..<3, using: &random)]
                        animal = Dog(name: name, age: age, breed: breed)
                        (record.kind, record.breed, record.good) = ("Dog", breed, true)
                    case 2:
                        let teeth = Int.random(in: 0...28, using: &random)
                        animal = Puppy(name: name, age: age, breed: "pug", teeth: teeth)
                        (record.kind, record.breed, record.good, record.teeth) = ("Puppy", "pug", true, teeth)
                    default:
                        let lives = Int.random(in: 1...9, using: &random)
                        animal = Cat(name: name, age: age, lives: lives)
                        (record.kind, record.lives) = ("Cat", lives)
                    }
                    tree.insert(animal)
                    flat.insert(record)
                case 5..<8:
                    let animal = animals[Int.random(in: 0..<animals.count, using: &random)]
                    let name = animal.name
                    let record = try XCTUnwrap(
                        flat.fetch(FetchDescriptor<FlatAnimal>(predicate: #Predicate { $0.name == name })).first)
                    let age = Int.random(in: 0...15, using: &random)
                    animal.age = age
                    record.age = age
                    if let dog = animal as? Dog, Bool.random(using: &random) {
                        dog.good.toggle()
                        record.good = dog.good
                    }
                    if let cat = animal as? Cat {
                        cat.lives = max(cat.lives - 1, 0)
                        record.lives = cat.lives
                    }
                default:
                    let animal = animals[Int.random(in: 0..<animals.count, using: &random)]
                    let name = animal.name
                    tree.delete(animal)
                    try flat.delete(model: FlatAnimal.self, where: #Predicate { $0.name == name })
                }
            }
            if round % 7 == 6 {
                // A batch delete of one class only, or with its subclasses.
                let limit = Int.random(in: 0...15, using: &random)
                let subclasses = Bool.random(using: &random)
                try tree.delete(model: Dog.self, where: #Predicate { $0.age < limit }, includeSubclasses: subclasses)
                let kinds = subclasses ? ["Dog", "Puppy"] : ["Dog"]
                try flat.delete(model: FlatAnimal.self, where: #Predicate { kinds.contains($0.kind) && $0.age < limit })
            }
            // Unsaved changes count in fetches as saved ones do.
            try compare(tree, flat, random: &random, label: "seed \(seed), round \(round), unsaved")
            try tree.save()
            try flat.save()
            try compare(tree, flat, random: &random, label: "seed \(seed), round \(round)")
        }
    }

    private func compare(_ tree: ModelContext, _ flat: ModelContext, random: inout SeededRandom, label: String) throws {
        let order = [SortDescriptor(\FlatAnimal.age), SortDescriptor(\FlatAnimal.name)]
        let all = try flat.fetch(FetchDescriptor<FlatAnimal>(sortBy: order))
        func expected(_ kinds: Set<String>, _ test: (FlatAnimal) -> Bool = { _ in true }) -> [String] {
            all.filter { kinds.contains($0.kind) && test($0) }.map(describe)
        }
        func fetched<T: Animal>(_ type: T.Type, _ predicate: Predicate<T>? = nil) throws -> [String] {
            try tree.fetch(FetchDescriptor<T>(predicate: predicate, sortBy: [SortDescriptor(\.age), SortDescriptor(\.name)]))
                .map(describe)
        }
        XCTAssertEqual(try fetched(Animal.self), expected(below["Animal"]!), label)
        XCTAssertEqual(try fetched(Dog.self), expected(below["Dog"]!), label)
        XCTAssertEqual(try fetched(Puppy.self), expected(below["Puppy"]!), label)
        XCTAssertEqual(try fetched(Cat.self), expected(below["Cat"]!), label)
        let age = Int.random(in: 0...15, using: &random)
        XCTAssertEqual(
            try fetched(Animal.self, #Predicate { $0 is Dog && $0.age >= age }),
            expected(below["Dog"]!) { $0.age >= age }, label)
        XCTAssertEqual(
            try fetched(Animal.self, #Predicate { !($0 is Dog) || $0.age == age }),
            expected(below["Animal"]!) { !below["Dog"]!.contains($0.kind) || $0.age == age }, label)
        XCTAssertEqual(
            try fetched(Animal.self, #Predicate { ($0 as? Dog)?.good == false }),
            expected(below["Dog"]!) { $0.good == false }, label)
        XCTAssertEqual(
            try fetched(
                Animal.self,
                #Predicate { animal in
                    if let cat = animal as? Cat { return cat.lives < 5 } else { return false }
                }),
            expected(below["Cat"]!) { ($0.lives ?? 9) < 5 }, label)
        let count = try tree.fetchCount(FetchDescriptor<Animal>(predicate: #Predicate { $0.age < age }))
        XCTAssertEqual(count, expected(below["Animal"]!) { $0.age < age }.count, label)
        // Sorted by name descending, paged.
        var paged = FetchDescriptor<Animal>(sortBy: [SortDescriptor(\.name, order: .reverse)])
        paged.fetchOffset = Int.random(in: 0...5, using: &random)
        paged.fetchLimit = Int.random(in: 1...8, using: &random)
        let names = all.map(\.name).sorted(by: >)
        let start = min(paged.fetchOffset ?? 0, names.count)
        XCTAssertEqual(
            try tree.fetch(paged).map(\.name), Array(names[start..<min(start + (paged.fetchLimit ?? 0), names.count)]),
            label)
    }
}
